#include "worker/pack_optimizer.h"

#include <cmath>

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
                             std::vector<int64_t> step_offsets)
    : kind_(specs[0]->optimizer), params_(std::move(params)), offsets_(std::move(step_offsets)) {
  if (offsets_.empty()) offsets_.assign(specs.size(), 0);
  const torch::Device device = params_[0].device();
  lr_ = PerMember(specs, &MemberSpec::lr, device);
  weight_decay_ = PerMember(specs, &MemberSpec::weight_decay, device);
  momentum_ = PerMember(specs, &MemberSpec::momentum, device);
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
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
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
