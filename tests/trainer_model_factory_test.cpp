// BuildModel (worker/models/model.h): a pack's model by its members' kind. An MLP pack has a member
// a slice and its kind's parameters; a TorchScript member's missing file is NotFound naming
// it; a command member has no model of ours.
#include "support/trainer_fixture.h"

#include "worker/models/model.h"

namespace ens {
namespace {

using namespace ens::testing;

MemberSpec Member(ModelKind kind, const std::string& path = "") {
  MemberSpec m;
  m.name = "m";
  m.model.kind = kind;
  m.model.path = path;
  if (kind == ModelKind::kMlp) m.layers = {{8, Activation::kTanh, 0.0}, {4, Activation::kRelu, 0.0}};
  if (kind == ModelKind::kCommand) m.model.argv = {"/bin/true"};
  return m;
}

TEST_CASE("BuildModel builds an MLP pack with a slice a member and refuses what it cannot build", "[trainer][model]") {
  const MemberSpec mlp = Member(ModelKind::kMlp);
  std::vector<ModelMember> three = {{&mlp, 1, 2}, {&mlp, 3, 4}, {&mlp, 5, 6}};
  auto built = BuildModel(three, kFeatures, 2, torch::kCPU);
  REQUIRE(built.ok());
  Model& model = **built;
  CHECK(model.Members() == 3);
  const auto params = model.Parameters();
  REQUIRE(params.size() == 6);  // three layers: a kernel and a bias each
  CHECK(params[0].sizes() == std::vector<int64_t>{3, 8, kFeatures});
  CHECK(params[4].sizes() == std::vector<int64_t>{3, 2, 4});
  CHECK(model.Forward(torch::zeros({3, 5, kFeatures}), false).sizes() == std::vector<int64_t>{3, 5, 2});

  ScratchDir dir;
  const MemberSpec script = Member(ModelKind::kTorchscript, dir.File("gone.pt"));
  auto missing = BuildModel({{&script, 1, 2}}, kFeatures, 1, torch::kCPU);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message().find(dir.File("gone.pt")) != std::string::npos);

  const MemberSpec command = Member(ModelKind::kCommand);
  auto none = BuildModel({{&command, 1, 2}}, kFeatures, 1, torch::kCPU);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace ens
