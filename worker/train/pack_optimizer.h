// PackOptimizer: Adam, AdamW or SGD over stacked parameters [K, ...] with every
// hyperparameter per member (lr, weight_decay, momentum as [K, 1, ...] tensors).
//
// Each update is elementwise in the parameter, so member k's step depends only on its own
// slice and hyperparameters: its bits are the same in a pack of any size. The formulas are
// torch's (Adam: Kingma & Ba with bias correction, eps 1e-8, betas 0.9/0.999; AdamW:
// decoupled decay p *= 1 - lr*wd; SGD: g += wd*p, buf = momentum*buf + g, p -= lr*buf).
// Adam ignores weight_decay, as the config documents. A warm-started member continues its
// previous round's optimizer: its moments are set, and its bias correction counts its earlier
// steps (a per-member step offset), so again nothing depends on its pack mates.
// L1 and L2 (per member) apply to the `penalised` parameters (the model's kernels) as
// gradient terms of each step: g += l1 * sign(p) + 2 * l2 * p, the gradient of the loss terms
// l1 |p| + l2 p^2, which the reported loss never included. On the CPU a member with both 0
// skips them (its own choice, not its pack's); on CUDA every member adds them.
// A step makes no host-device copy and no sync: every per-step scalar lives on the device.
// On the CPU a step is one pass over each member's slice (optimizer_kernel.h) instead of a
// dozen pack-wide kernels per parameter.
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "common/config/config.h"

namespace ens {

// One value per member from its spec, as a [K, 1, 1] tensor on `device`: a per-member
// hyperparameter that broadcasts over any stacked [K, rows, cols] parameter.
torch::Tensor PerMember(const std::vector<const MemberSpec*>& specs, double MemberSpec::*field, torch::Device device);

// How a step runs: the device's way (on the CPU one pass per member slice, on CUDA tensor
// ops), tensor ops wherever the parameters are (which lets the CPU tests check the CUDA
// formulas), or the CPU kernel whatever the parameters are (a test's: a device tensor must get
// cpu_only.h's error).
enum class StepPath { kByDevice, kTensorOps, kCpuKernel };

class PackOptimizer {
 public:
  // REQUIRES: every spec has the same optimizer kind; params all have leading dim K;
  // step_offsets empty (no member has taken a step before) or one per member; penalised a
  // subset of params (the same tensors).
  PackOptimizer(const std::vector<const MemberSpec*>& specs, std::vector<torch::Tensor> params,
                std::vector<int64_t> step_offsets = {}, const std::vector<torch::Tensor>& penalised = {},
                StepPath path = StepPath::kByDevice);

  void ZeroGrad();
  // One update of every parameter from its .grad().
  void Step();

  // One member's optimizer state: Adam's first and second moments (m, v), or SGD's momentum
  // buffer (m; v empty), one per parameter, as its slices [...] (copies).
  struct Moments {
    std::vector<torch::Tensor> m, v;
  };
  Moments MemberMoments(int64_t k) const;
  // REQUIRES: shapes as MemberMoments(k) gives them.
  void SetMemberMoments(int64_t k, const Moments& s);
  // Steps member k has taken: its offset plus the steps of this pack so far.
  int64_t MemberSteps(int64_t k) const { return offsets_[static_cast<size_t>(k)] + step_; }

 private:
  void StepOnCpu();

  OptimizerKind kind_;
  StepPath path_;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> m_, v_;  // Adam moments / SGD momentum buffer (m_)
  torch::Tensor lr_, weight_decay_, momentum_;  // [K, 1, 1]
  torch::Tensor l1_, l2_;                       // [K, 1, 1]
  std::vector<bool> penalised_;                 // per parameter
  torch::Tensor beta1_pow_, beta2_pow_;         // Adam: beta^(steps taken), [K, 1, 1] double
  std::vector<int64_t> offsets_;  // per member: steps taken before this pack
  int64_t step_ = 0;
};

}  // namespace ens
