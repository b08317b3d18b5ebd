#include "worker/objective.h"

#include "worker/pack_optimizer.h"

namespace ens {

RegressionObjective::RegressionObjective(const std::vector<const MemberSpec*>& specs, torch::Device device)
    : kind_(specs[0]->loss), delta_(PerMember(specs, &MemberSpec::huber_delta, device).view({-1, 1})) {}

torch::Tensor RegressionObjective::ElementLoss(const torch::Tensor& pred, const torch::Tensor& target) const {
  torch::Tensor e = pred - target;
  switch (kind_) {
    case LossKind::kMae:
      return e.abs();
    case LossKind::kHuber: {
      torch::Tensor a = e.abs();
      return torch::where(a <= delta_, 0.5 * e * e, delta_ * (a - 0.5 * delta_));
    }
    case LossKind::kMse:
      break;
  }
  return e * e;
}

torch::Tensor RegressionObjective::RowSums(const torch::Tensor& x) {
  return x.cumsum(-1, torch::kDouble).select(-1, -1);
}

RegressionObjective::ErrorSums RegressionObjective::Errors(const torch::Tensor& pred_units, const torch::Tensor& y) {
  torch::Tensor err = pred_units - y;
  return {RowSums(err.abs()), RowSums(err * err)};
}

std::pair<torch::Tensor, torch::Tensor> RegressionObjective::Combine(const torch::Tensor& member_preds) {
  return {member_preds.mean(0), member_preds.std(0, /*unbiased=*/false)};
}

}  // namespace ens
