#include "worker/train/pack_optimizer.h"

#include <algorithm>
#include <cmath>

#include "worker/device/cpu_only.h"
#include "worker/kernels/optimizer_kernel.h"

namespace ens {
namespace {

constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

}  // namespace

torch::Tensor PerMember(const std::vector<const MemberSpec*>& specs, double MemberSpec::*field, torch::Device device) {
  std::vector<float> v;
  for (const MemberSpec* s : specs) v.push_back(static_cast<float>(s->*field));
  return torch::tensor(v).view({-1, 1, 1}).to(device);
}

PackOptimizer::PackOptimizer(const std::vector<const MemberSpec*>& specs, std::vector<torch::Tensor> params,
                             std::vector<int64_t> step_offsets, const std::vector<torch::Tensor>& penalised,
                             StepPath path)
    : kind_(specs[0]->optimizer), path_(path), params_(std::move(params)), offsets_(std::move(step_offsets)) {
  for (const auto& p : params_)
    penalised_.push_back(std::any_of(penalised.begin(), penalised.end(), [&](const torch::Tensor& k) { return k.is_same(p); }));
  if (offsets_.empty()) offsets_.assign(specs.size(), 0);
  const torch::Device device = params_[0].device();
  lr_ = PerMember(specs, &MemberSpec::lr, device);
  weight_decay_ = PerMember(specs, &MemberSpec::weight_decay, device);
  momentum_ = PerMember(specs, &MemberSpec::momentum, device);
  l1_ = PerMember(specs, &MemberSpec::l1, device);
  l2_ = PerMember(specs, &MemberSpec::l2, device);
  if (kind_ != OptimizerKind::kSgd) {
    // beta^t of each member's step count so far, in double: one copy here, then updated on
    // the device every step.
    std::vector<double> b1(offsets_.size()), b2(offsets_.size());
    for (size_t k = 0; k < offsets_.size(); ++k) {
      b1[k] = std::pow(kBeta1, static_cast<double>(offsets_[k]));
      b2[k] = std::pow(kBeta2, static_cast<double>(offsets_[k]));
    }
    beta1_pow_ = torch::tensor(b1, torch::kDouble).view({-1, 1, 1}).to(device);
    beta2_pow_ = torch::tensor(b2, torch::kDouble).view({-1, 1, 1}).to(device);
  }
  for (const auto& p : params_) {
    m_.push_back(torch::zeros_like(p, p.options().requires_grad(false)));
    if (kind_ != OptimizerKind::kSgd) v_.push_back(torch::zeros_like(p, p.options().requires_grad(false)));
  }
}

void PackOptimizer::ZeroGrad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void PackOptimizer::Step() {
  torch::NoGradGuard no_grad;
  ++step_;
  if (path_ == StepPath::kCpuKernel || (path_ == StepPath::kByDevice && params_[0].is_cpu())) return StepOnCpu();
  // Adam's bias corrections per member (its own step count), on the device: beta^t by one
  // multiplication per step (elementwise and exactly rounded, so the same bits in a pack of
  // any size), 1 - beta^t in double, then float. Nothing is read from or sent to the host.
  torch::Tensor step_size, bc2_sqrt;  // Adam: lr / bc1 and sqrt(bc2), [K, 1, 1]
  if (kind_ != OptimizerKind::kSgd) {
    beta1_pow_.mul_(kBeta1);
    beta2_pow_.mul_(kBeta2);
    step_size = lr_ / (1.0 - beta1_pow_).to(torch::kFloat);
    bc2_sqrt = (1.0 - beta2_pow_).sqrt_().to(torch::kFloat);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor g = penalised_[i] ? p.grad() + l1_ * p.sign() + (2.0 * l2_) * p : p.grad();
    if (kind_ == OptimizerKind::kSgd) {
      torch::Tensor d = g + weight_decay_ * p;
      m_[i].mul_(momentum_).add_(d);
      p.sub_(lr_ * m_[i]);
      continue;
    }
    if (kind_ == OptimizerKind::kAdamW) p.mul_(1.0 - lr_ * weight_decay_);
    m_[i].mul_(kBeta1).add_(g, 1.0 - kBeta1);
    v_[i].mul_(kBeta2).addcmul_(g, g, 1.0 - kBeta2);
    torch::Tensor denom = (v_[i].sqrt() / bc2_sqrt).add_(kEps);
    p.sub_(step_size * m_[i] / denom);
  }
}

// The same update member by member (optimizer_kernel.h): beta^t and the bias corrections per
// member as on the device (double, then float), then one pass over each member's slice of each
// parameter.
void PackOptimizer::StepOnCpu() {
  RequireCpu("the optimizer kernel", params_);
  RequireCpu("the optimizer kernel", m_);
  RequireCpu("the optimizer kernel", v_);
  RequireCpu("the optimizer kernel", {lr_, weight_decay_, momentum_, l1_, l2_, beta1_pow_, beta2_pow_});
  for (const auto& p : params_) RequireCpu("the optimizer kernel", {p.grad()});
  const int64_t members = params_[0].size(0);
  std::vector<float> step_size(static_cast<size_t>(members)), bc2_sqrt(static_cast<size_t>(members));
  const float* lr = lr_.data_ptr<float>();
  const float* wd = weight_decay_.data_ptr<float>();
  const float* momentum = momentum_.data_ptr<float>();
  const float* l1 = l1_.data_ptr<float>();
  const float* l2 = l2_.data_ptr<float>();
  if (kind_ != OptimizerKind::kSgd) {
    double* b1 = beta1_pow_.data_ptr<double>();
    double* b2 = beta2_pow_.data_ptr<double>();
    for (int64_t k = 0; k < members; ++k) {
      b1[k] *= kBeta1;
      b2[k] *= kBeta2;
      step_size[k] = lr[k] / static_cast<float>(1.0 - b1[k]);
      bc2_sqrt[k] = static_cast<float>(std::sqrt(1.0 - b2[k]));
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    TORCH_CHECK(p.is_contiguous() && m_[i].is_contiguous(), "optimizer state must be contiguous");
    const torch::Tensor g = p.grad().contiguous();
    const int64_t n = p.numel() / members;
    for (int64_t k = 0; k < members; ++k) {
      float* pk = p.data_ptr<float>() + k * n;
      const float* gk = g.data_ptr<float>() + k * n;
      float* mk = m_[i].data_ptr<float>() + k * n;
      const float l1k = penalised_[i] ? l1[k] : 0.0f, l2k = penalised_[i] ? l2[k] : 0.0f;
      if (kind_ == OptimizerKind::kSgd) {
        SgdUpdate(pk, mk, gk, n, l1k, l2k, lr[k], wd[k], momentum[k]);
        continue;
      }
      const float decay = kind_ == OptimizerKind::kAdamW ? 1.0f - lr[k] * wd[k] : 1.0f;
      AdamUpdate(pk, mk, v_[i].data_ptr<float>() + k * n, gk, n, l1k, l2k, decay, step_size[k], bc2_sqrt[k]);
    }
  }
}

PackOptimizer::Moments PackOptimizer::MemberMoments(int64_t k) const {
  Moments s;
  for (const auto& t : m_) s.m.push_back(t[k].detach().clone());
  for (const auto& t : v_) s.v.push_back(t[k].detach().clone());
  return s;
}

void PackOptimizer::SetMemberMoments(int64_t k, const Moments& s) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < m_.size() && i < s.m.size(); ++i) m_[i][k].copy_(s.m[i]);
  for (size_t i = 0; i < v_.size() && i < s.v.size(); ++i) v_[i][k].copy_(s.v[i]);
}

}  // namespace ens
