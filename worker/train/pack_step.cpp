#include "worker/train/pack_step.h"

#include <cmath>
#include <optional>

#include "worker/train/tensor_loss_ops.h"

namespace ens {
namespace {

constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

// One float per member as a [K, 1] tensor on `device`.
torch::Tensor Column(const std::vector<float>& v, torch::Device device) {
  return torch::tensor(v, torch::kFloat).view({-1, 1}).to(device);
}

// out = activation(pre), elementwise, written into `out` (a view).
void Activate(torch::Tensor out, const torch::Tensor& pre, Activation act) {
  switch (act) {
    case Activation::kRelu: at::clamp_min_out(out, pre, 0); return;
    case Activation::kTanh: at::tanh_out(out, pre); return;
    case Activation::kSigmoid: at::sigmoid_out(out, pre); return;
    case Activation::kSwish: at::sigmoid_out(out, pre), out.mul_(pre); return;
    // Not gelu_out: libtorch 2.11's CPU gelu writes wrong values into a strided output
    // (measured: off by up to 2.6 in a column slice), so a tensor of its own, then a copy.
    case Activation::kGelu: out.copy_(at::gelu(pre)); return;
    case Activation::kLinear: out.copy_(pre); return;
  }
}

}  // namespace

bool PackStepFits(const std::vector<const MemberSpec*>& specs, int classes, int targets) {
  if (classes > 0 || targets != 1) return false;
  for (const MemberSpec* s : specs) {
    if (s->warm_start || s->model.kind != ModelKind::kMlp || s->adversarial_eps > 0) return false;
    if (!TraitsOf(s->loss).pack_step) return false;
  }
  return true;
}

PackStep::PackStep(Model& model, const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm)
    : kind_(specs[0]->optimizer), loss_(specs[0]->loss) {
  std::optional<MlpLayers> ml = model.Layers();
  TORCH_CHECK(ml.has_value(), "PackStep needs a model that gives its layers");
  TORCH_CHECK(TraitsOf(loss_).pack_step, "PackStep does not train loss ", Name(loss_), " (PackStepFits)");
  dropout_ = ml->dropout;
  members_ = ml->weights[0].size(0);
  features_ = ml->weights[0].size(2);
  const auto opts = ml->weights[0].options().requires_grad(false);
  const size_t n_layers = ml->weights.size();
  int64_t offset = 0;
  for (size_t l = 0; l < n_layers; ++l) {
    Layer layer;
    layer.in = ml->weights[l].size(2);
    layer.out = ml->weights[l].size(1);
    layer.offset = offset;
    layer.activation = l < ml->activations.size() ? ml->activations[l] : Activation::kLinear;
    offset += layer.out * (layer.in + 1);
    layers_.push_back(layer);
  }
  TORCH_CHECK(layers_.back().out == 1, "PackStep trains one output");
  params_ = offset;
  torch::NoGradGuard no_grad;
  flat_ = torch::empty({members_, params_ + 1}, opts);
  flat_.select(1, params_).fill_(-1.0);
  const int64_t planes = kind_ == OptimizerKind::kSgd ? 1 : 2;
  grad_ = torch::zeros({planes, members_, params_ + 1}, opts);
  std::vector<torch::Tensor> weights, biases;
  std::vector<float> kernel_mask(static_cast<size_t>(params_), 0.0f);
  for (size_t l = 0; l < n_layers; ++l) {
    Layer& layer = layers_[l];
    const bool last = l + 1 == n_layers;
    const int64_t cols = layer.in + 1 + (last ? 1 : 0);  // the output layer's -1 too
    layer.w_aug = flat_.narrow(1, layer.offset, layer.out * cols).view({members_, layer.out, cols});
    layer.g_aug = grad_[0].narrow(1, layer.offset, layer.out * cols).view({members_, layer.out, cols});
    torch::Tensor w = layer.w_aug.narrow(2, 1, layer.in), b = layer.w_aug.narrow(2, 0, 1).transpose(1, 2);
    w.copy_(ml->weights[l]);
    b.copy_(ml->biases[l]);
    weights.push_back(w);
    biases.push_back(b);
    for (int64_t o = 0; o < layer.out; ++o)
      for (int64_t i = 0; i < layer.in; ++i) kernel_mask[static_cast<size_t>(layer.offset + o * (layer.in + 1) + 1 + i)] = 1;
  }
  model.AdoptLayers(weights, biases);

  state_ = torch::zeros({planes, members_, params_}, opts);
  SetHyper(specs, kernel_mask, opts);
  mean_ = torch::cat({norm.xm, norm.ym.unsqueeze(-1)}, 2);
  std_ = torch::cat({norm.xs, norm.ys.unsqueeze(-1)}, 2);
  ys_ = norm.ys;
}

// The optimizer's and the loss's per-member values as columns on the pack's device; L1 and L2
// only on kernel entries (kernel_mask), and only when some member has them.
void PackStep::SetHyper(const std::vector<const MemberSpec*>& specs, const std::vector<float>& kernel_mask,
                        const torch::TensorOptions& opts) {
  const torch::Device dev = opts.device();
  std::vector<float> decay, wd, momentum, neg_lr, l1, l2, delta;
  bool any_decay = false, any_l1 = false, any_l2 = false;
  for (const MemberSpec* s : specs) {
    const float lr = static_cast<float>(s->lr), w = static_cast<float>(s->weight_decay);
    lr_.push_back(s->lr);
    decay.push_back(1.0f - lr * w);
    wd.push_back(w);
    momentum.push_back(static_cast<float>(s->momentum));
    neg_lr.push_back(-lr);
    l1.push_back(static_cast<float>(s->l1));
    l2.push_back(static_cast<float>(2.0 * s->l2));
    delta.push_back(static_cast<float>(s->huber_delta));
    any_decay = any_decay || w != 0.0f;
    any_l1 = any_l1 || s->l1 != 0.0;
    any_l2 = any_l2 || s->l2 != 0.0;
  }
  const torch::Tensor mask = torch::tensor(kernel_mask, torch::kFloat).view({1, -1}).to(dev);
  if (any_l1) l1_ = Column(l1, dev) * mask;
  if (any_l2) l2_ = Column(l2, dev) * mask;
  if (kind_ == OptimizerKind::kSgd) {
    if (any_decay) weight_decay_ = Column(wd, dev);
    momentum_ = Column(momentum, dev);
    neg_lr_ = Column(neg_lr, dev);
  } else {
    if (kind_ == OptimizerKind::kAdamW && any_decay) decay_ = Column(decay, dev);
    denom_ = torch::empty({members_, params_}, opts);
    moment_weight_ = torch::tensor(std::vector<float>{static_cast<float>(1.0 - kBeta1), static_cast<float>(1.0 - kBeta2)},
                                   torch::kFloat)
                         .view({2, 1, 1})
                         .to(dev);
  }
  delta_ = Column(delta, dev).unsqueeze(-1);
  neg_delta_ = -delta_;
}

void PackStep::SetPoison(const torch::Tensor& poison) {
  poison_ = poison.defined() ? poison.view({-1, 1, 1}) : torch::Tensor();
}

void PackStep::BeginWindow(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch,
                           const std::function<torch::Tensor(const torch::Tensor&)>& to_device) {
  torch::NoGradGuard no_grad;
  const int64_t len = ix.size(1), f = features_;
  const auto opts = flat_.options();
  const size_t hidden = layers_.size() - 1;
  if (!inputs_.defined() || inputs_.size(1) < len) {  // the first window is the longest
    inputs_ = torch::empty({members_, len, f + 2}, opts);
    inputs_.select(2, 0).fill_(1.0);
    errors_ = torch::empty({members_, len, 1}, opts);
    if (hidden > 0) {
      last_in_ = torch::empty({members_, len, layers_[hidden - 1].out + 2}, opts);
      last_in_.select(2, 0).fill_(1.0);
    }
  }
  if (batch_ != batch) {  // per-step buffers
    batch_ = batch;
    residual_ = torch::empty({members_, batch, 1}, opts);
    for (size_t l = 0; l < hidden; ++l) {
      Layer& layer = layers_[l];
      layer.pre = torch::empty({members_, batch, layer.out}, opts);
      layer.act = torch::empty({members_, batch, layer.out}, opts);
      layer.grad_post = torch::zeros({members_, batch, layer.out}, opts);  // a product's C with beta 0: never NaN
      layer.grad_pre = torch::empty({members_, batch, layer.out}, opts);
      if (l + 1 < hidden) {
        layer.post = torch::empty({members_, batch, layer.out + 1}, opts);
        layer.post.select(2, 0).fill_(1.0);
      }
    }
  }
  const torch::Tensor rows = all.index({ix});  // [K, len, F + 1]
  torch::Tensor z = inputs_.narrow(1, 0, len).narrow(2, 1, f + 1);
  at::sub_out(z, rows, mean_);
  z.div_(std_);
  if (hidden > 0)
    last_in_.narrow(1, 0, len).select(2, layers_[hidden - 1].out + 1).copy_(inputs_.narrow(1, 0, len).select(2, f + 1));
  window_rows_ = len;
  window_step_ = 0;
  if (kind_ != OptimizerKind::kSgd) {
    // Adam's per-member A and E of each step of the window (the file's comment), from the
    // steps taken so far: every member of a PackStep pack has taken as many (no warm start).
    const int64_t steps = (len + batch - 1) / batch;
    torch::Tensor host = torch::empty({steps, 2, members_, 1}, torch::kFloat);
    float* t = host.data_ptr<float>();
    for (int64_t s = 0; s < steps; ++s) {
      const double n = static_cast<double>(steps_ + s + 1);
      const double bc1 = 1.0 - std::pow(kBeta1, n), bc2 = 1.0 - std::pow(kBeta2, n);
      for (int64_t k = 0; k < members_; ++k) {
        const double lr = lr_[static_cast<size_t>(k)];
        t[(s * 2) * members_ + k] = static_cast<float>(bc1 / (lr * std::sqrt(bc2)));
        t[(s * 2 + 1) * members_ + k] = static_cast<float>(kEps * bc1 / lr);
      }
    }
    table_ = to_device(host);
  }
}

torch::Tensor PackStep::Input(size_t layer, int64_t first, int64_t rows) const {
  const size_t hidden = layers_.size() - 1;
  if (layer == 0) return inputs_.narrow(1, first, rows).narrow(2, 0, features_ + 1 + (hidden == 0 ? 1 : 0));
  if (layer == hidden) return last_in_.narrow(1, first, rows);
  return layers_[layer - 1].post.narrow(1, 0, rows);
}

// The activations' output (before dropout) of hidden layer l, as Forward left it.
torch::Tensor PackStep::Activated(size_t l, int64_t first, int64_t rows) const {
  const Layer& layer = layers_[l];
  if (layer.mask.defined()) return layer.act.narrow(1, 0, rows);
  return Input(l + 1, first, rows).narrow(2, 1, layer.out);
}

void PackStep::Forward(int64_t first, int64_t rows) {
  const size_t hidden = layers_.size() - 1;
  for (size_t l = 0; l < hidden; ++l) {
    Layer& layer = layers_[l];
    torch::Tensor pre = layer.pre.narrow(1, 0, rows);
    at::bmm_out(pre, Input(l, first, rows), layer.w_aug.transpose(1, 2));
    torch::Tensor out = Input(l + 1, first, rows).narrow(2, 1, layer.out);
    layer.mask = dropout_ ? dropout_(rows, layer.out, l) : torch::Tensor();
    if (!layer.mask.defined()) {
      Activate(out, pre, layer.activation);
      continue;
    }
    torch::Tensor a = layer.act.narrow(1, 0, rows);
    Activate(a, pre, layer.activation);
    at::mul_out(out, a, layer.mask);
  }
  torch::Tensor e = errors_.narrow(1, first, rows);
  at::bmm_out(e, Input(hidden, first, rows), layers_[hidden].w_aug.transpose(1, 2));
}

torch::Tensor PackStep::ActivationBackward(size_t l, const torch::Tensor& grad_post, int64_t first, int64_t rows) {
  Layer& layer = layers_[l];
  const torch::Tensor pre = layer.pre.narrow(1, 0, rows);
  torch::Tensor g = layer.grad_pre.narrow(1, 0, rows);
  switch (layer.activation) {
    case Activation::kRelu: at::threshold_backward_out(g, grad_post, pre, 0); return g;
    case Activation::kTanh: at::tanh_backward_out(g, grad_post, Activated(l, first, rows)); return g;
    case Activation::kSigmoid: at::sigmoid_backward_out(g, grad_post, Activated(l, first, rows)); return g;
    case Activation::kGelu: at::gelu_backward_out(g, grad_post, pre); return g;
    case Activation::kSwish: {  // d/dx x s(x) = s + x s (1 - s)
      const torch::Tensor s = torch::sigmoid(pre);
      at::mul_out(g, grad_post, s + pre * s * (1 - s));
      return g;
    }
    case Activation::kLinear: return grad_post;
  }
  return grad_post;
}

void PackStep::Backward(int64_t first, int64_t rows) {
  const size_t hidden = layers_.size() - 1;
  const torch::Tensor e = errors_.narrow(1, first, rows);
  torch::Tensor r = residual_.narrow(1, 0, rows);
  // d(sum over members of the batch's mean loss) / d e = loss'(e) / rows: the 1 / rows rides
  // on the products below as their alpha.
  const double alpha = 1.0 / static_cast<double>(rows);
  if (loss_ == LossKind::kHuber) {
    // HuberLoss::Slopes (loss_formulas.h) with -delta made once, not every step: one kernel.
    at::clamp_out(r, e, neg_delta_, delta_);
  } else {
    torch::Tensor slopes[2];
    LossSlopes<TensorLossOps>(loss_, e, delta_, torch::Tensor(), slopes);
    r = slopes[0];
  }
  if (poison_.defined()) {
    torch::Tensor poisoned = residual_.narrow(1, 0, rows);
    at::mul_out(poisoned, r, poison_);
    r = poisoned;
  }
  Layer& out = layers_[hidden];
  at::baddbmm_out(out.g_aug, out.g_aug, r.transpose(1, 2), Input(hidden, first, rows), 0.0, alpha);
  if (hidden == 0) return;
  torch::Tensor below = layers_[hidden - 1].grad_post.narrow(1, 0, rows);
  at::baddbmm_out(below, below, r, out.w_aug.narrow(2, 1, out.in), 0.0, alpha);
  for (size_t l = hidden; l-- > 0;) {
    Layer& layer = layers_[l];
    torch::Tensor grad_post = layer.grad_post.narrow(1, 0, rows);
    if (layer.mask.defined()) grad_post.mul_(layer.mask);
    const torch::Tensor grad_pre = ActivationBackward(l, grad_post, first, rows);
    at::bmm_out(layer.g_aug, grad_pre.transpose(1, 2), Input(l, first, rows));
    if (l == 0) break;
    torch::Tensor next = layers_[l - 1].grad_post.narrow(1, 0, rows);
    at::bmm_out(next, grad_pre, layer.w_aug.narrow(2, 1, layer.in));
  }
}

void PackStep::Update() {
  torch::Tensor p = flat_.narrow(1, 0, params_);
  torch::Tensor g = grad_[0].narrow(1, 0, params_);
  if (l1_.defined()) g.addcmul_(p.sign(), l1_);
  if (l2_.defined()) g.addcmul_(p, l2_);
  if (kind_ == OptimizerKind::kSgd) {
    if (weight_decay_.defined()) g.addcmul_(p, weight_decay_);
    torch::Tensor m = state_[0];
    m.mul_(momentum_).add_(g);
    p.addcmul_(m, neg_lr_);
    return;
  }
  if (decay_.defined()) p.mul_(decay_);
  torch::Tensor g2 = grad_[1].narrow(1, 0, params_);
  at::mul_out(g2, g, g);
  state_.lerp_(grad_.narrow(2, 0, params_), moment_weight_);
  at::sqrt_out(denom_, state_[1]);
  const torch::Tensor row = table_[window_step_];  // [2, K, 1]: A, E
  at::addcmul_out(denom_, row[1], denom_, row[0]);
  p.addcdiv_(state_[0], denom_, -1);
}

void PackStep::StepBody(int64_t first, int64_t rows) {
  Forward(first, rows);
  Backward(first, rows);
  Update();
}

void PackStep::Step(int64_t first, int64_t rows) {
  torch::NoGradGuard no_grad;
  StepBody(first, rows);
  ++steps_;
  ++window_step_;
}

void PackStep::EndWindow(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums) {
  torch::NoGradGuard no_grad;
  const torch::Tensor e = errors_.narrow(1, 0, window_rows_).select(2, 0);  // [K, len]
  torch::Tensor elem = LossValue<TensorLossOps>(loss_, e, delta_.select(2, 0), torch::Tensor());
  if (poison_.defined()) elem = elem * poison_.select(2, 0);
  loss_sum.add_(elem.sum(-1, false, torch::kDouble));
  const torch::Tensor err = e * ys_;  // prediction - target in the target's units
  sums[0].add_(err.abs().sum(-1, false, torch::kDouble));
  sums[1].add_((err * err).sum(-1, false, torch::kDouble));
}

}  // namespace ens
