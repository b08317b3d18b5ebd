// BuildModel: one case a model kind (model.h). A new kind adds its case here and its builder
// in a file of its own (worker/<kind>_model.cpp, which CMake picks up by that name).
#include <string>

#include "worker/models/model.h"
#include "worker/models/script_model.h"

namespace ens {

StatusOr<std::unique_ptr<Model>> BuildModel(const std::vector<ModelMember>& members, int features, int outputs,
                                            torch::Device device) {
  const MemberSpec& first = *members[0].spec;
  switch (first.model.kind) {
    case ModelKind::kMlp:
      return BuildMlp(members, features, outputs, device);
    case ModelKind::kTorchscript: {  // a pack of one (pack_plan.h)
      auto module = LoadUserModule(first.model.path, features, outputs);
      if (!module.ok()) return module.status();
      return BuildScriptModel(members[0], std::move(*module), outputs, device);
    }
    case ModelKind::kCommand:  // trained by its own program (task_runner.h), never here
      return Status::InvalidArgument("a command member has no model of ours");
  }
  return Status::InvalidArgument("model kind " + std::to_string(static_cast<int>(first.model.kind)) + " has no builder");
}

}  // namespace ens
