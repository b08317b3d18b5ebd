// Regression losses, each written once: its value and its slopes (d loss / d output) as
// expressions over an ops policy O, so that every engine runs the same formula:
//  - the lane kernel (lane_kernel_body.inc's LaneOps: its vector or scalar float operations,
//    compiled for every CPU ISA and by nvcc);
//  - the torch engines (worker/train/tensor_loss_ops.h): objective.cpp's autograd loss (the
//    value; autograd takes its gradient) and PackStep's loss and gradient (value and slopes).
// One struct a loss; LossValue and LossSlopes dispatch on LossKind with a checked switch (no
// default:). Which engines take a loss is its LossTraits row (common/config/member_options.h):
// a new regression loss is that row and its struct and two cases here.
//
// Arguments: e the standardised error (prediction - standardised target), delta the member's
// huber_delta, r the second output of a loss with two (LossTraits::outputs; gaussian_nll's
// variance), anything otherwise. Slopes writes s[0] = d loss / d e and, for two outputs,
// s[1] = d loss / d r.
// O provides Abs, Sign (libtorch's: 0 at 0 and NaN), Clamp(x, lo, hi), Where(mask, a, b), Log,
// Softplus, SoftplusDerivative, and NotRegression(kind) (the torch ops throw; the lane kernel
// never gets such a kind: LaneFits); V has +, -, *, / and comparisons with V and float.
// Each expression is the exact float operations, in order, that every engine computes: one
// changed here changes the bits of every member that trains with the loss.
// No state; thread-safe. No libtorch and no library call: nvcc compiles it for the device.
#pragma once

#include "common/config/member_options.h"

#if defined(__CUDACC__)
#define ENS_LOSS_INLINE __host__ __device__ __forceinline__
#else
#define ENS_LOSS_INLINE inline __attribute__((always_inline))
#endif

namespace ens {

struct MseLoss {
  template <class O, class V>
  static ENS_LOSS_INLINE V Value(const V& e, const V&, const V&) {
    return e * e;
  }
  template <class O, class V>
  static ENS_LOSS_INLINE void Slopes(const V& e, const V&, const V&, V* s) {
    s[0] = e + e;
  }
};

struct MaeLoss {
  template <class O, class V>
  static ENS_LOSS_INLINE V Value(const V& e, const V&, const V&) {
    return O::Abs(e);
  }
  template <class O, class V>
  static ENS_LOSS_INLINE void Slopes(const V& e, const V&, const V&, V* s) {
    s[0] = O::Sign(e);
  }
};

// 0.5 e^2 within delta of 0, delta (|e| - delta / 2) beyond (loss_kernel.h: the CPU objective's
// kernel of the same expression).
struct HuberLoss {
  template <class O, class V>
  static ENS_LOSS_INLINE V Value(const V& e, const V& delta, const V&) {
    const V a = O::Abs(e), inner = (0.5f * e) * e, outer = delta * (a - 0.5f * delta);
    return O::Where(a <= delta, inner, outer);
  }
  template <class O, class V>
  static ENS_LOSS_INLINE void Slopes(const V& e, const V& delta, const V&, V* s) {
    s[0] = O::Clamp(e, -delta, delta);
  }
};

// 0.5 (ln var + e^2 / var), var = softplus(r) + 1e-6 of the second output r.
struct GaussianNllLoss {
  template <class O, class V>
  static ENS_LOSS_INLINE V Value(const V& e, const V&, const V& r) {
    const V var = O::Softplus(r) + 1e-6f;
    return 0.5f * (O::Log(var) + e * e / var);
  }
  template <class O, class V>
  static ENS_LOSS_INLINE void Slopes(const V& e, const V&, const V& r, V* s) {
    const V var = O::Softplus(r) + 1e-6f, q = e / var;
    s[0] = q;
    s[1] = (0.5f * (1.0f / var - q * q)) * O::SoftplusDerivative(r);
  }
};

// The loss of each element. A kind that is not a regression loss: O::NotRegression, then e.
template <class O, class V>
ENS_LOSS_INLINE V LossValue(LossKind kind, const V& e, const V& delta, const V& r) {
  switch (kind) {
    case LossKind::kMse: return MseLoss::Value<O>(e, delta, r);
    case LossKind::kMae: return MaeLoss::Value<O>(e, delta, r);
    case LossKind::kHuber: return HuberLoss::Value<O>(e, delta, r);
    case LossKind::kGaussianNll: return GaussianNllLoss::Value<O>(e, delta, r);
    case LossKind::kCrossEntropy: break;  // the classification objective's, not elementwise
  }
  O::NotRegression(kind);
  return e;
}

// The slopes of each element into s[0] (and s[1] for two outputs). A kind that is not a
// regression loss: O::NotRegression, and s as it was.
template <class O, class V>
ENS_LOSS_INLINE void LossSlopes(LossKind kind, const V& e, const V& delta, const V& r, V* s) {
  switch (kind) {
    case LossKind::kMse: return MseLoss::Slopes<O>(e, delta, r, s);
    case LossKind::kMae: return MaeLoss::Slopes<O>(e, delta, r, s);
    case LossKind::kHuber: return HuberLoss::Slopes<O>(e, delta, r, s);
    case LossKind::kGaussianNll: return GaussianNllLoss::Slopes<O>(e, delta, r, s);
    case LossKind::kCrossEntropy: break;
  }
  O::NotRegression(kind);
}

}  // namespace ens
