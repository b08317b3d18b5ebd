// Objective: what a pack of members is trained to do — the target transform, the loss, the
// metrics — and how members' predictions combine into the ensemble's.
//
// Today's one kind is regression on one target: each member standardises the target with
// its own training split's mean and std (the checkpoint undoes it), the loss is one of
// mse | mae | huber (huber_delta per member), metrics are mae and mse in target units, and
// the ensemble predicts the mean of its members with their (population) std as the spread.
// Every per-member value is a tensor row, so members of one pack may differ in them.
// Includes libtorch: include only from worker/*.cpp files that already pay for it.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "common/config.h"

namespace ens {

class RegressionObjective {
 public:
  // REQUIRES: every spec has the same loss kind (PackKey equal).
  RegressionObjective(const std::vector<const MemberSpec*>& specs, torch::Device device);

  // Per-element loss of standardised predictions against standardised targets, both [K, B].
  // Train on .mean(-1) (its gradient is elementwise); report RowSums(...) / B.
  torch::Tensor ElementLoss(const torch::Tensor& pred, const torch::Tensor& target) const;

  // Per-member sums over the last dimension, in double, [K]. A sequential scan per row: a
  // vectorised reduction may order its additions by the tensor's layout, which differs
  // between a lone member and a pack; these sums do not.
  static torch::Tensor RowSums(const torch::Tensor& x);

  // Sums of one step's errors in target units, [K] doubles each (accumulated on the device).
  struct ErrorSums {
    torch::Tensor abs, sq;
  };
  static ErrorSums Errors(const torch::Tensor& pred_units, const torch::Tensor& y);

  // The ensemble's mean and spread of member predictions [M, n] -> ([n], [n]).
  static std::pair<torch::Tensor, torch::Tensor> Combine(const torch::Tensor& member_preds);

 private:
  LossKind kind_;
  torch::Tensor delta_;  // [K, 1] huber_delta per member
};

}  // namespace ens
