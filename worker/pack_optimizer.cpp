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

PackOptimizer::PackOptimizer(const std::vector<const MemberSpec*>& specs, std::vector<torch::Tensor> params)
    : kind_(specs[0]->optimizer), params_(std::move(params)) {
  const torch::Device device = params_[0].device();
  lr_ = PerMember(specs, &MemberSpec::lr, device);
  weight_decay_ = PerMember(specs, &MemberSpec::weight_decay, device);
  momentum_ = PerMember(specs, &MemberSpec::momentum, device);
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
  const double bc1 = 1.0 - std::pow(kBeta1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(kBeta2, static_cast<double>(step_)));
  torch::Tensor step_size;  // Adam: lr / bc1, per member
  if (kind_ != OptimizerKind::kSgd) step_size = lr_ / bc1;
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

}  // namespace ens
