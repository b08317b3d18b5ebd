// Objective: what a pack of members is trained to do — the loss, the metrics — on the model's
// outputs [K, B, outputs], one kind per run (config "task").
//
//  regression (RegressionObjective): one output. Each member standardises the target with its
//    own training split's mean and std (the checkpoint undoes it); the loss is the member's
//    regression loss (worker/kernels/loss_formulas.h; huber_delta per member); metrics mae and
//    mse in target units.
//    Several targets (data.target_columns): one output per target, y [K, B, T], each target
//    standardised on its own; a row's loss and metrics are the means over its targets.
//    gaussian_nll: two outputs, the mean and r, whose variance is softplus(r) + 1e-6
//    (standardised units); the loss is 0.5 (log var + (y - mean)^2 / var); metrics of the mean.
//  classification (ClassificationObjective): one output per class (logits); the target is
//    the class index. Loss: cross-entropy of log_softmax, with label smoothing eps per member
//    ((1 - eps) * nll + eps * mean over classes of -log p); metrics accuracy, nll (without
//    smoothing) and brier (sum over classes of (p - onehot)^2), per row.
// Every per-member value is a tensor row, so members of one pack may differ in them, and no
// operation mixes members (model.h).
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace ens {

class Objective {
 public:
  virtual ~Objective() = default;
  // Per-element loss [K, B] of outputs [K, B, O] against the batch's raw targets y [K, B]
  // (several regression targets: y [K, B, T], O = T).
  // Train on .mean(-1) (its gradient is elementwise); report RowSums(...) / B.
  virtual torch::Tensor ElementLoss(const torch::Tensor& out, const torch::Tensor& y) const = 0;
  // The metrics' names, in the order MetricSums returns them.
  virtual const std::vector<std::string>& MetricNames() const = 0;
  // Per-member sums of each metric over one batch, [K] doubles each (accumulated on the device).
  virtual std::vector<torch::Tensor> MetricSums(const torch::Tensor& out, const torch::Tensor& y) const = 0;

  // Per-member sums over the last dimension, in double, [K]. A sequential scan per row: a
  // vectorised reduction may order its additions by the tensor's layout, which differs
  // between a lone member and a pack; these sums do not.
  static torch::Tensor RowSums(const torch::Tensor& x);
};

// ym, ys: [K, 1] the members' target mean and std (standardisation); several targets [K, 1, T].
// REQUIRES: every spec has the same loss kind (PackKey equal). `tensor_ops`: the CUDA path's
// loss expression wherever the pack is (trainer.h TrainPath), never the CPU's huber kernel.
std::unique_ptr<Objective> MakeRegressionObjective(const std::vector<const MemberSpec*>& specs,
                                                   const torch::Tensor& ym, const torch::Tensor& ys,
                                                   torch::Device device, bool tensor_ops = false);
// The class count is the model's output width.
std::unique_ptr<Objective> MakeClassificationObjective(const std::vector<const MemberSpec*>& specs,
                                                       torch::Device device);

// The huber loss of standardised errors e [K, ...] (contiguous float) with one delta per member
// [K], through the CPU kernel (loss_kernel.h) as one autograd node: what a regression objective
// runs on the CPU. Throws c10::Error for a tensor not on the CPU (cpu_only.h).
torch::Tensor HuberLossOnCpu(const torch::Tensor& e, const torch::Tensor& delta);

}  // namespace ens
