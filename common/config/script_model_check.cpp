#include "common/config/script_model_check.h"

#include <set>

#include "common/base/subprocess.h"

namespace ens {

std::vector<ConfigError> CheckScriptModels(const std::vector<MemberSpec>& members, int features, int outputs,
                                           const std::string& worker_binary) {
  std::vector<ConfigError> errors;
  std::set<std::string> seen;
  for (size_t i = 0; i < members.size(); ++i) {
    const ModelSpec& model = members[i].model;
    if (model.kind != ModelKind::kTorchscript || !seen.insert(model.path).second) continue;
    const std::string at = model.path_at.empty() ? "/members" : model.path_at;
    SubprocessSpec spec;
    spec.argv = {worker_binary,  "check-model", "--path", model.path, "--features", std::to_string(features),
                 "--outputs", std::to_string(outputs)};
    auto ran = RunToEnd(spec, "", 300.0);
    if (!ran.ok()) {
      errors.push_back({at, "cannot check the module: " + ran.status().message()});
      continue;
    }
    if (ran->exit.ok()) continue;
    std::string said = ran->out;
    while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
    if (said.empty()) said = "ensemble-worker check-model " + ran->exit.Describe();
    errors.push_back({at, said});
  }
  return errors;
}

}  // namespace ens
