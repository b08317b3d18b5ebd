// A member's predictions without its module (checkpoint.h: PredictRows on MemberParts) are the
// bits its TorchScript module gives (PredictRows on BuildMemberModule): for every activation,
// one to three hidden layers, each head (one target, several, Gaussian, classes), features
// that are and are not a multiple of four, and row counts below, at and above one block; and a
// lane member's forward (the lane kernel's, lane_forward_source.h) on every activation and both
// of its heads, from its parts and from its weights file.
#include "support/trainer_fixture.h"

#include "common/base/atomic_file.h"

namespace ens {
namespace {

using namespace ens::testing;

struct Shape {
  std::vector<Activation> hidden;  // one per hidden layer
  int units = 6;
  LossKind loss = LossKind::kMse;
  int classes = 0;
  int targets = 1;
  int features = kFeatures;
  bool lane = false;  // the lane kernel's forward (Model::UseLaneForward)
};

int Outputs(const Shape& s) {
  if (s.classes > 0) return s.classes;
  return s.loss == LossKind::kGaussianNll ? 2 : s.targets;
}

// Member `k` of a pack of two built by BuildMlp (kernels from the seed, then every parameter
// moved by a draw so no bias is zero; the standardisation drawn too), as the trainer hands it
// to the checkpoint.
MemberParts PartsOf(const Shape& s, uint64_t seed, int64_t k) {
  std::vector<MemberSpec> specs(2);
  std::vector<ModelMember> members;
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].name = "m" + std::to_string(i);
    specs[i].loss = s.loss;
    for (Activation a : s.hidden) specs[i].layers.push_back({s.units, a, 0.0});
    members.push_back({&specs[i], seed + i, seed + 10 + i});
  }
  auto model = BuildMlp(members, s.features, Outputs(s), torch::kCPU);
  if (s.lane) model->UseLaneForward();
  torch::manual_seed(seed);
  std::vector<torch::Tensor> slices;
  for (const torch::Tensor& p : model->Parameters()) {
    torch::NoGradGuard no_grad;
    p.add_(torch::randn_like(p) * 0.5);
    slices.push_back(p[k]);
  }
  const int t = s.classes > 0 ? 1 : s.targets;
  return {specs[k], s.classes, model->MemberTensors(slices), model->MemberForwardSource(), model->MemberStatements(),
          std::nullopt, torch::randn({s.features}), torch::rand({s.features}) + 0.5, torch::randn({t}) * 3,
          torch::rand({t}) * 2 + 0.1};
}

void RequireSameBits(const Shape& s, uint64_t seed, float scale = 2) {
  MemberParts parts = PartsOf(s, seed, 1);
  REQUIRE(!parts.statements.empty());
  auto module = BuildMemberModule(parts);
  INFO(module.status().ToString());
  REQUIRE(module.ok());
  for (int64_t n : {1, 192, 200, 600}) {
    // Rows of features then a target column, as the worker's tables hold them (strided rows).
    torch::Tensor table = torch::randn({n, s.features + 1}) * scale;
    torch::Tensor x = table.narrow(1, 0, s.features);
    std::vector<float> eager = PredictRows(parts, x), scripted = PredictRows(*module, x);
    INFO("rows " << n << ", outputs " << Outputs(s) << ", features " << s.features);
    REQUIRE(eager.size() == scripted.size());
    REQUIRE(eager.size() == static_cast<size_t>(n * Outputs(s)));
    CHECK(std::memcmp(eager.data(), scripted.data(), eager.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("every activation predicts the module's bits without the module", "[trainer][prediction]") {
  for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid, Activation::kSwish,
                       Activation::kGelu, Activation::kLinear}) {
    INFO("activation " << static_cast<int>(a));
    RequireSameBits({{a}}, 11);
    RequireSameBits({{a, Activation::kSigmoid}, 16}, 12);
  }
}

TEST_CASE("three hidden layers and features not a multiple of four predict the module's bits", "[trainer][prediction]") {
  Shape s{{Activation::kTanh, Activation::kLinear, Activation::kRelu}, 13};
  RequireSameBits(s, 21);
  s.features = 5;
  RequireSameBits(s, 22);
  RequireSameBits({{}, 6, LossKind::kMse, 0, 1, 7}, 23);  // no hidden layer: one product
}

TEST_CASE("several targets, a Gaussian head and a classifier predict the module's bits", "[trainer][prediction]") {
  RequireSameBits({{Activation::kRelu}, 8, LossKind::kMse, 0, 3}, 31);
  RequireSameBits({{Activation::kSwish}, 8, LossKind::kGaussianNll}, 32);
  RequireSameBits({{Activation::kGelu}, 8, LossKind::kCrossEntropy, 4}, 33);
}

TEST_CASE("a lane member's forward predicts its module's bits without the module", "[trainer][prediction][lanes]") {
  // The statement runs the lane kernel (LaneForwardRows); the module runs lane_forward_source.h's
  // TorchScript. Rows scaled by 40 reach e^x's clamps; by 0.01, the activations' small-argument
  // branches.
  uint64_t seed = 50;
  for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid, Activation::kSwish,
                       Activation::kGelu, Activation::kLinear})
    for (LossKind loss : {LossKind::kMse, LossKind::kGaussianNll}) {
      INFO("activation " << static_cast<int>(a) << ", loss " << static_cast<int>(loss));
      for (float scale : {2.0f, 40.0f, 0.01f}) RequireSameBits({{a}, 6, loss, 0, 1, kFeatures, true}, seed++, scale);
      RequireSameBits({{a, Activation::kTanh, a}, 5, loss, 0, 1, 3, true}, seed++);
      RequireSameBits({{}, 6, loss, 0, 1, 7, true}, seed++);  // no hidden layer
    }
}

TEST_CASE("a lane member's module from its weights file predicts the same bits, and not the GEMM forward's", "[trainer][prediction][lanes]") {
  const Shape lane{{Activation::kSigmoid, Activation::kGelu}, 8, LossKind::kGaussianNll, 0, 1, kFeatures, true};
  Shape gemm = lane;
  gemm.lane = false;
  const MemberParts parts = PartsOf(lane, 61, 0), before = PartsOf(gemm, 61, 0);
  auto bytes = MemberWeightsFileBytes(parts);
  REQUIRE(bytes.ok());
  auto weights = ParseMemberWeights(*bytes, "lane weights");
  REQUIRE(weights.ok());
  auto module = BuildMemberModule(*weights, "lane weights");
  REQUIRE(module.ok());
  torch::Tensor x = torch::randn({300, kFeatures}) * 2;
  const std::vector<float> eager = PredictRows(parts, x), scripted = PredictRows(*module, x), old = PredictRows(before, x);
  REQUIRE(eager.size() == scripted.size());
  CHECK(std::memcmp(eager.data(), scripted.data(), eager.size() * sizeof(float)) == 0);
  REQUIRE(old.size() == eager.size());
  CHECK(std::memcmp(old.data(), eager.data(), eager.size() * sizeof(float)) != 0);  // another forward

  // predict's reading (LoadLaneMemberParts): the lane member's file as parts with the module's
  // bits; a GEMM member's file, or a lane file whose source is not exactly the lane module's,
  // as none (its module is built instead).
  ScratchDir dir;
  auto gemm_bytes = MemberWeightsFileBytes(before);
  REQUIRE(gemm_bytes.ok());
  MemberWeights edited = *weights;
  edited.source += "\n";
  const std::pair<std::string, std::string> files[] = {
      {"lane.bin", *bytes}, {"gemm.bin", *gemm_bytes}, {"edited.bin", MemberWeightsBytes(edited)}};
  for (const auto& [name, content] : files) REQUIRE(WriteFileDurable(dir.File(name), content).ok());
  auto loaded = LoadLaneMemberParts(dir.File("lane.bin"));
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  const std::vector<float> from_file = PredictRows(**loaded, x);
  REQUIRE(from_file.size() == scripted.size());
  CHECK(std::memcmp(from_file.data(), scripted.data(), scripted.size() * sizeof(float)) == 0);
  for (const char* other : {"gemm.bin", "edited.bin"}) {
    INFO(other);
    auto none = LoadLaneMemberParts(dir.File(other));
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
    CHECK(LoadMember(dir.File(other)).ok());
  }
  CHECK_FALSE(LoadLaneMemberParts(dir.File("missing.bin")).ok());
}

TEST_CASE("the MLP has one statement for each top-level line of its forward source", "[trainer][prediction]") {
  // Each statement is given aligned rows, as each top-level line of the source is: a statement
  // missing (a linear activation has none) would align at another place. (A lane member's
  // forward is one statement, the kernel, whatever its rows' alignment: not here.)
  for (const Shape& s : {Shape{{Activation::kRelu}}, Shape{{Activation::kLinear, Activation::kTanh}},
                         Shape{{}}, Shape{{Activation::kSwish, Activation::kLinear, Activation::kGelu}}}) {
    MemberParts parts = PartsOf(s, 41, 0);
    const auto lines = std::count(parts.forward_source.begin(), parts.forward_source.end(), '\n');
    INFO(parts.forward_source);
    CHECK(static_cast<int64_t>(parts.statements.size()) == lines);
  }
}

}  // namespace
}  // namespace ens
