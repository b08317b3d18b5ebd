// The huber loss on the CPU (worker/kernels/loss_kernel.h, through the regression objective) against
// the libtorch expression it replaced, where(|e| <= d, 0.5 e e, d (|e| - 0.5 d)) with autograd:
// the same bits for the loss and for the gradient of the outputs, member by member with their
// own deltas, one target and several, with weighted rows (as a poisoned row's zero weight),
// and at the edges: |e| exactly d, zeros of both signs, large errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "worker/train/objective.h"

namespace ens {
namespace {

bool SameBits(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

struct Outcome {
  torch::Tensor loss, grad;
};

// out [K, B, T]; y zeros of y_shape, ym 0 and ys 1: the standardised error is out itself.
Outcome Through(const torch::Tensor& out_values, const std::vector<int64_t>& y_shape, const torch::Tensor& weights,
                const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss_of) {
  torch::Tensor out = out_values.clone().set_requires_grad(true);
  torch::Tensor y = torch::zeros(y_shape);
  torch::Tensor loss = loss_of(out, y);
  (loss * weights).mean(-1).sum().backward();
  return {loss.detach(), out.grad()};
}

void CheckAgainstExpression(const std::vector<double>& deltas, const torch::Tensor& out_values, int64_t targets) {
  const int64_t K = out_values.size(0), B = out_values.size(1);
  std::vector<MemberSpec> specs(K);
  std::vector<const MemberSpec*> ptrs;
  for (int64_t k = 0; k < K; ++k) {
    specs[k].loss = LossKind::kHuber;
    specs[k].huber_delta = deltas[k];
    ptrs.push_back(&specs[k]);
  }
  const bool several = targets > 1;
  std::vector<int64_t> y_shape = several ? std::vector<int64_t>{K, B, targets} : std::vector<int64_t>{K, B};
  torch::Tensor ym = several ? torch::zeros({K, 1, targets}) : torch::zeros({K, 1});
  torch::Tensor ys = several ? torch::ones({K, 1, targets}) : torch::ones({K, 1});
  auto objective = MakeRegressionObjective(ptrs, ym, ys, torch::kCPU);
  torch::Tensor weights = torch::rand({K, B});
  weights.index_put_({0, 0}, 0.0f);  // a poisoned row
  Outcome kernel = Through(out_values, y_shape, weights,
                           [&](const torch::Tensor& out, const torch::Tensor& y) { return objective->ElementLoss(out, y); });

  std::vector<float> dv(deltas.begin(), deltas.end());
  torch::Tensor delta = torch::tensor(dv).view(several ? std::vector<int64_t>{K, 1, 1} : std::vector<int64_t>{K, 1});
  auto expression = [&](const torch::Tensor& e) {
    torch::Tensor a = e.abs();
    return torch::where(a <= delta, 0.5 * e * e, delta * (a - 0.5 * delta));
  };
  Outcome reference = Through(out_values, y_shape, weights, [&](const torch::Tensor& out, const torch::Tensor& y) {
    if (!several) return expression(out.select(-1, 0) - (y - ym) / ys);
    torch::Tensor per_target = expression(out - (y - ym) / ys);  // the objective's mean over targets
    return per_target.cumsum(-1).select(-1, -1) / static_cast<double>(targets);
  });
  CHECK(SameBits(kernel.loss, reference.loss));
  CHECK(SameBits(kernel.grad, reference.grad));
  // Both branches were taken.
  torch::Tensor e = out_values.abs();
  CHECK((e <= 0.5).any().item<bool>());
  CHECK((e > 2.0).any().item<bool>());
}

TEST_CASE("the huber loss kernel gives the libtorch expression's loss and gradient bits, one target", "[trainer][loss]") {
  torch::manual_seed(11);
  const int64_t K = 5, B = 37;
  torch::Tensor out = torch::randn({K, B, 1}) * 3.0;
  std::vector<double> deltas{0.35, 1.0, 0.05, 2.5, 1.0};
  // The edges: |e| exactly delta on both sides, zeros of both signs, a huge error.
  out.index_put_({0, 1, 0}, 0.35f);
  out.index_put_({0, 2, 0}, -0.35f);
  out.index_put_({1, 3, 0}, 0.0f);
  out.index_put_({1, 4, 0}, -0.0f);
  out.index_put_({2, 5, 0}, 3.0e30f);
  out.index_put_({3, 6, 0}, -2.5f);
  CheckAgainstExpression(deltas, out, 1);
}

TEST_CASE("the huber loss kernel gives the libtorch expression's loss and gradient bits, several targets",
          "[trainer][loss]") {
  torch::manual_seed(12);
  const int64_t K = 3, B = 16, T = 4;
  torch::Tensor out = torch::randn({K, B, T}) * 2.0;
  out.index_put_({1, 0, 2}, -0.0f);
  out.index_put_({2, 1, 3}, 0.8f);
  CheckAgainstExpression({0.5, 0.8, 1.7}, out, T);
}

}  // namespace
}  // namespace ens
