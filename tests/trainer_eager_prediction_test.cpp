// A member's predictions without its module (checkpoint.h: PredictRows on MemberParts) are the
// bits its TorchScript module gives (PredictRows on BuildMemberModule): for every activation,
// one to three hidden layers, each head (one target, several, Gaussian, classes), features
// that are and are not a multiple of four, and row counts below, at and above one block.
#include "support/trainer_fixture.h"

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

void RequireSameBits(const Shape& s, uint64_t seed) {
  MemberParts parts = PartsOf(s, seed, 1);
  REQUIRE(!parts.statements.empty());
  auto module = BuildMemberModule(parts);
  REQUIRE(module.ok());
  for (int64_t n : {1, 192, 200, 600}) {
    // Rows of features then a target column, as the worker's tables hold them (strided rows).
    torch::Tensor table = torch::randn({n, s.features + 1}) * 2;
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

TEST_CASE("the MLP has one statement for each top-level line of its forward source", "[trainer][prediction]") {
  // Each statement is given aligned rows, as each top-level line of the source is: a statement
  // missing (a linear activation has none) would align at another place.
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
