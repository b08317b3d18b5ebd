// TensorLossOps: worker/kernels/loss_formulas.h's operations on libtorch tensors, so the torch
// engines (objective.cpp's autograd loss, PackStep's loss and gradient) run the losses'
// formulas as the lane kernel does: LossValue<TensorLossOps>(kind, e, delta, r).
//
// Each is the libtorch operation the engines used before the formulas were shared (the
// objective's softplus written out, libtorch's sign and clamp), so their bits stay. A kind
// without a regression formula (cross_entropy) throws std::invalid_argument naming it: the
// config never lets one through, so that is a bug, never another loss in its place.
// Stateless; thread-safe. Includes libtorch: include only from worker/*/*.cpp files.
#pragma once

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "worker/kernels/loss_formulas.h"

namespace ens {

struct TensorLossOps {
  static torch::Tensor Abs(const torch::Tensor& x) { return x.abs(); }
  static torch::Tensor Sign(const torch::Tensor& x) { return x.sign(); }
  static torch::Tensor Clamp(const torch::Tensor& x, const torch::Tensor& lo, const torch::Tensor& hi) {
    return at::clamp(x, lo, hi);
  }
  static torch::Tensor Where(const torch::Tensor& mask, const torch::Tensor& a, const torch::Tensor& b) {
    return torch::where(mask, a, b);
  }
  static torch::Tensor Log(const torch::Tensor& x) { return x.log(); }
  // Written out (no threshold branch): the same expression here and in the checkpoint.
  static torch::Tensor Softplus(const torch::Tensor& r) { return torch::log1p(torch::exp(-r.abs())) + torch::relu(r); }
  // Its derivative as autograd takes it through that expression: relu'(r) - sign(r) y / (1 + y).
  static torch::Tensor SoftplusDerivative(const torch::Tensor& r) {
    const torch::Tensor y = torch::exp(-r.abs());
    return (r > 0).to(r.scalar_type()) - r.sign() * (y / (1 + y));
  }
  [[noreturn]] static void NotRegression(LossKind kind) {
    throw std::invalid_argument("loss \"" + std::string(Name(kind)) + "\" has no elementwise regression loss");
  }
};

}  // namespace ens
