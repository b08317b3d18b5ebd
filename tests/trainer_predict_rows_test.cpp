// A member's eager predictions (worker/predict/checkpoint.h PredictRows): its standardisation, row
// copies and regression head run as plain loops (worker/kernels/predict_rows_kernel.h) between the
// member's statements, and give the bits of PredictRowsByOps (every step a libtorch operator,
// as the module's forward_block) for every activation, input and layer width, target count
// and row count around the 192-row block; heads the loops do not take (Gaussian,
// classification) go through the operators.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/predict/checkpoint.h"
#include "worker/device/dispatch_count.h"

namespace ens {
namespace {

torch::Tensor Activated(const torch::Tensor& h, const std::string& act) {
  if (act == "relu") return torch::relu(h);
  if (act == "tanh") return torch::tanh(h);
  if (act == "sigmoid") return torch::sigmoid(h);
  if (act == "swish") return h * torch::sigmoid(h);
  if (act == "gelu") return torch::gelu(h);
  return h;
}

// An MLP member f -> units (act) -> units (act) -> outputs with random weights and
// standardisation, its statements spelled as the MLP model's (worker/models/mlp_model.cpp).
MemberParts Member(int64_t f, int64_t units, int64_t outputs, const std::string& act, LossKind loss, int classes) {
  MemberParts p;
  p.spec.name = "m000";
  p.spec.loss = loss;
  p.classes = classes;
  const int64_t widths[] = {f, units, units, outputs};
  for (int l = 0; l < 3; ++l) {
    p.tensors.emplace_back("layer" + std::to_string(l) + "_weight", torch::randn({widths[l + 1], widths[l]}) * 0.7);
    p.tensors.emplace_back("layer" + std::to_string(l) + "_bias", torch::randn({widths[l + 1]}) * 0.3);
    p.statements.push_back([l](const NamedTensors& t, const torch::Tensor& h) {
      return torch::addmm(t[2 * l + 1].second, h, t[2 * l].second.t());
    });
    if (l < 2 && act != "linear")
      p.statements.push_back([act](const NamedTensors&, const torch::Tensor& h) { return Activated(h, act); });
  }
  p.x_mean = torch::randn({f}) * 3.0;
  p.x_std = torch::rand({f}) * 2.0 + 0.1;
  const int64_t y_width = classes > 0 ? 1 : loss == LossKind::kGaussianNll ? 1 : outputs;
  p.y_mean = torch::randn({y_width}) * 5.0;
  p.y_std = torch::rand({y_width}) * 3.0 + 0.5;
  return p;
}

void RequireSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  CHECK(differ == 0);
}

TEST_CASE("a regression member's predictions by loops are its predictions by operators, bit for bit",
          "[trainer][predict_rows]") {
  torch::manual_seed(11);
  torch::set_num_threads(1);
  for (const char* act : {"relu", "tanh", "sigmoid", "swish", "gelu", "linear"})
    for (int64_t f : {1, 3, 9, 10, 17})
      for (int64_t units : {1, 6, 16, 33})
        for (int64_t targets : {1, 3})
          for (int64_t n : {1, 191, 192, 193, 400}) {
            INFO(act << " features " << f << " units " << units << " targets " << targets << " rows " << n);
            const MemberParts p = Member(f, units, targets, act, LossKind::kMse, 0);
            // Rows of a table with the targets beside the features (as the worker reads them).
            const torch::Tensor table = torch::randn({n, f + targets}) * 4.0;
            const torch::Tensor x = table.narrow(1, 0, f);
            RequireSameBits(PredictRows(p, x), PredictRowsByOps(p, x));
          }
}

TEST_CASE("Gaussian and classification members are predicted through the operators", "[trainer][predict_rows]") {
  torch::manual_seed(12);
  torch::set_num_threads(1);
  const torch::Tensor table = torch::randn({250, 10}) * 2.0;
  const torch::Tensor x = table.narrow(1, 0, 9);
  const MemberParts gaussian = Member(9, 6, 2, "sigmoid", LossKind::kGaussianNll, 0);
  const std::vector<float> g = PredictRows(gaussian, x);
  CHECK(g.size() == 250 * 2);
  RequireSameBits(g, PredictRowsByOps(gaussian, x));
  const MemberParts classifier = Member(9, 6, 4, "relu", LossKind::kCrossEntropy, 4);
  const std::vector<float> c = PredictRows(classifier, x);
  CHECK(c.size() == 250 * 4);
  RequireSameBits(c, PredictRowsByOps(classifier, x));
}

// What the loops are for: a block's kernels are its statements' alone (dispatch_count.h counts
// operators that compute; views and bare allocations are free there).
TEST_CASE("by loops a block runs its statements' operators and no others", "[trainer][predict_rows]") {
  torch::manual_seed(13);
  torch::set_num_threads(1);
  const MemberParts p = Member(9, 6, 1, "sigmoid", LossKind::kHuber, 0);  // 5 statements
  const torch::Tensor table = torch::randn({400, 10});                   // 3 blocks
  const torch::Tensor x = table.narrow(1, 0, 9);
  int64_t by_loops = 0, by_ops = 0;
  std::map<std::string, int64_t> loop_ops;
  {
    DispatchCount count;
    (void)PredictRows(p, x);
    by_loops = count.total();
    loop_ops = count.by_name();
  }
  {
    DispatchCount count;
    (void)PredictRowsByOps(p, x);
    by_ops = count.total();
  }
  INFO("operators by loops " << by_loops << ", by operators " << by_ops);
  CHECK(loop_ops["aten::addmm"] == 3 * 3);
  CHECK(loop_ops["aten::sigmoid"] == 3 * 2);
  for (const auto& [name, n] : loop_ops) UNSCOPED_INFO(name << " " << n);
  // Nothing else, not even once a call: the member's buffers are taken as they are.
  CHECK(by_loops == 3 * 5);
  CHECK(by_ops > 2 * by_loops);
}

TEST_CASE("an empty input predicts nothing", "[trainer][predict_rows]") {
  const MemberParts p = Member(9, 6, 1, "sigmoid", LossKind::kMse, 0);
  CHECK(PredictRows(p, torch::zeros({0, 9})).empty());
}

}  // namespace
}  // namespace ens
