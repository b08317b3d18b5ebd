#include "worker/train/objective.h"

#include <algorithm>

#include <ATen/Parallel.h>

#include "worker/device/cpu_only.h"
#include "worker/kernels/loss_kernel.h"
#include "worker/train/pack_optimizer.h"
#include "worker/train/tensor_loss_ops.h"

namespace ens {
namespace {

// Ranges of members over the intra-op threads, as libtorch splits an elementwise kernel (at
// least 32,768 elements a chunk): a member's values do not depend on the split.
template <typename F>
void ForMembers(int64_t members, int64_t per_member, const F& f) {
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, per_member));
  at::parallel_for(0, members, grain, [&](int64_t begin, int64_t end) { f(begin, end - begin); });
}

// The huber loss through worker/kernels/loss_kernel.h: one pass forward and one backward on the CPU,
// the same bits as the libtorch expression. e [K, ...] contiguous float; delta K floats.
class HuberOnCpu : public torch::autograd::Function<HuberOnCpu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& e,
                               const torch::Tensor& delta) {
    RequireCpu("the huber loss kernel", {e, delta});
    ctx->save_for_backward({e, delta});
    torch::Tensor loss = torch::empty_like(e);
    const float *ev = e.data_ptr<float>(), *dv = delta.data_ptr<float>();
    float* lv = loss.data_ptr<float>();
    const int64_t per = e.numel() / e.size(0);
    ForMembers(e.size(0), per, [&](int64_t b, int64_t n) { HuberForward(ev + b * per, dv + b, n, per, lv + b * per); });
    return loss;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& e = saved[0];
    const torch::Tensor g = grads[0].expand_as(e).contiguous();
    RequireCpu("the huber loss kernel", {e, saved[1], g});
    torch::Tensor grad_e = torch::empty_like(e);
    const float *ev = e.data_ptr<float>(), *dv = saved[1].data_ptr<float>(), *gv = g.data_ptr<float>();
    float* out = grad_e.data_ptr<float>();
    const int64_t per = e.numel() / e.size(0);
    ForMembers(e.size(0), per, [&](int64_t b, int64_t n) {
      HuberBackward(ev + b * per, dv + b, gv + b * per, n, per, out + b * per);
    });
    return {grad_e, torch::Tensor()};
  }
};

bool HuberKernelFits(const torch::Tensor& e, const torch::Tensor& delta) {
  return e.device().is_cpu() && e.scalar_type() == torch::kFloat && e.dim() >= 1 && e.size(0) > 0 &&
         e.is_contiguous() && delta.device().is_cpu() && delta.scalar_type() == torch::kFloat &&
         delta.is_contiguous() && delta.numel() == e.size(0);
}

class RegressionObjective : public Objective {
 public:
  RegressionObjective(const std::vector<const MemberSpec*>& specs, const torch::Tensor& ym, const torch::Tensor& ys,
                      torch::Device device, bool tensor_ops)
      : kind_(specs[0]->loss),
        tensor_ops_(tensor_ops),
        delta_(PerMember(specs, &MemberSpec::huber_delta, device).view({-1, 1})),
        ym_(ym),
        ys_(ys) {}

  torch::Tensor ElementLoss(const torch::Tensor& out, const torch::Tensor& y) const override {
    if (y.dim() == 3) return MeanOverTargets(Loss(out - (y - ym_) / ys_, delta_.unsqueeze(-1)));
    torch::Tensor e = out.select(-1, 0) - (y - ym_) / ys_;
    if (TraitsOf(kind_).outputs == 2) return LossValue<TensorLossOps>(kind_, e, delta_, out.select(-1, 1));
    return Loss(e, delta_);
  }

  const std::vector<std::string>& MetricNames() const override {
    static const std::vector<std::string> names{"mae", "mse"};
    return names;
  }

  std::vector<torch::Tensor> MetricSums(const torch::Tensor& out, const torch::Tensor& y) const override {
    if (y.dim() == 3) {
      torch::Tensor err = out * ys_ + ym_ - y;
      return {RowSums(MeanOverTargets(err.abs())), RowSums(MeanOverTargets(err * err))};
    }
    torch::Tensor err = out.select(-1, 0) * ys_ + ym_ - y;
    return {RowSums(err.abs()), RowSums(err * err)};
  }

 private:
  // The loss of each standardised error e of a one-output loss (delta broadcast against e):
  // loss_formulas.h's, huber on the CPU through loss_kernel.h (the same bits in one pass).
  torch::Tensor Loss(const torch::Tensor& e, const torch::Tensor& delta) const {
    if (kind_ == LossKind::kHuber && !tensor_ops_ && HuberKernelFits(e, delta)) return HuberOnCpu::apply(e, delta);
    return LossValue<TensorLossOps>(kind_, e, delta, torch::Tensor());
  }
  // [K, B, T] -> [K, B]: the mean over the targets, summed in order (pack-invariant, as RowSums).
  static torch::Tensor MeanOverTargets(const torch::Tensor& v) {
    return v.cumsum(-1).select(-1, -1) / static_cast<double>(v.size(-1));
  }

  LossKind kind_;
  bool tensor_ops_;      // the CUDA path's expression wherever the pack is
  torch::Tensor delta_;  // [K, 1] huber_delta per member
  torch::Tensor ym_, ys_;  // [K, 1]; several targets: [K, 1, T]
};

class ClassificationObjective : public Objective {
 public:
  ClassificationObjective(const std::vector<const MemberSpec*>& specs, torch::Device device)
      : eps_(PerMember(specs, &MemberSpec::label_smoothing, device).view({-1, 1})) {}

  torch::Tensor ElementLoss(const torch::Tensor& out, const torch::Tensor& y) const override {
    torch::Tensor logp = torch::log_softmax(out, -1);
    torch::Tensor nll = -logp.gather(-1, Labels(y)).squeeze(-1);
    // Both terms always (a member with eps 0 then does what it does in any pack).
    return nll + eps_ * (-logp.mean(-1) - nll);
  }

  const std::vector<std::string>& MetricNames() const override {
    static const std::vector<std::string> names{"accuracy", "nll", "brier"};
    return names;
  }

  std::vector<torch::Tensor> MetricSums(const torch::Tensor& out, const torch::Tensor& y) const override {
    torch::Tensor labels = Labels(y);
    torch::Tensor logp = torch::log_softmax(out, -1);
    torch::Tensor hit = (out.argmax(-1, /*keepdim=*/true) == labels).squeeze(-1).to(out.scalar_type());
    torch::Tensor nll = -logp.gather(-1, labels).squeeze(-1);
    torch::Tensor p = logp.exp();
    torch::Tensor onehot = torch::zeros_like(p).scatter_(-1, labels, 1.0);
    torch::Tensor d = p - onehot;
    torch::Tensor brier = (d * d).cumsum(-1).select(-1, -1);  // sequential over classes
    return {RowSums(hit), RowSums(nll), RowSums(brier)};
  }

 private:
  static torch::Tensor Labels(const torch::Tensor& y) { return y.to(torch::kLong).unsqueeze(-1); }
  torch::Tensor eps_;  // [K, 1]
};

}  // namespace

torch::Tensor HuberLossOnCpu(const torch::Tensor& e, const torch::Tensor& delta) { return HuberOnCpu::apply(e, delta); }

torch::Tensor Objective::RowSums(const torch::Tensor& x) { return x.cumsum(-1, torch::kDouble).select(-1, -1); }

std::unique_ptr<Objective> MakeRegressionObjective(const std::vector<const MemberSpec*>& specs,
                                                   const torch::Tensor& ym, const torch::Tensor& ys,
                                                   torch::Device device, bool tensor_ops) {
  return std::make_unique<RegressionObjective>(specs, ym, ys, device, tensor_ops);
}

std::unique_ptr<Objective> MakeClassificationObjective(const std::vector<const MemberSpec*>& specs, torch::Device device) {
  return std::make_unique<ClassificationObjective>(specs, device);
}

}  // namespace ens
