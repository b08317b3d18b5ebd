#include "worker/kernels/optimizer_kernel.h"

#include <cmath>

namespace ens {
namespace {

constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;

// The gradient with the penalty's terms (sign(0) = 0, as abs's derivative in libtorch).
inline float Penalised(float g, float p, float l1, float l2x2) {
  const float sign = static_cast<float>(p > 0.0f) - static_cast<float>(p < 0.0f);
  return g + l1 * sign + l2x2 * p;
}

template <bool kPenalty>
void Adam(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v, const float* __restrict__ g, int64_t n,
          float l1, float l2x2, float decay, float step_size, float bc2_sqrt) {
  for (int64_t e = 0; e < n; ++e) {
    const float ge = kPenalty ? Penalised(g[e], p[e], l1, l2x2) : g[e];
    const float me = m[e] * kBeta1 + ge * (1.0f - kBeta1);
    const float ve = v[e] * kBeta2 + ge * ge * (1.0f - kBeta2);
    m[e] = me;
    v[e] = ve;
    p[e] = p[e] * decay - step_size * me / (std::sqrt(ve) / bc2_sqrt + kEps);
  }
}

template <bool kPenalty>
void Sgd(float* __restrict__ p, float* __restrict__ buf, const float* __restrict__ g, int64_t n, float l1, float l2x2,
         float lr, float weight_decay, float momentum) {
  for (int64_t e = 0; e < n; ++e) {
    const float ge = kPenalty ? Penalised(g[e], p[e], l1, l2x2) : g[e];
    const float b = buf[e] * momentum + (ge + weight_decay * p[e]);
    buf[e] = b;
    p[e] -= lr * b;
  }
}

}  // namespace

void AdamUpdate(float* p, float* m, float* v, const float* g, int64_t n, float l1, float l2, float decay,
                float step_size, float bc2_sqrt) {
  if (l1 != 0.0f || l2 != 0.0f) return Adam<true>(p, m, v, g, n, l1, 2.0f * l2, decay, step_size, bc2_sqrt);
  Adam<false>(p, m, v, g, n, l1, 0.0f, decay, step_size, bc2_sqrt);
}

void SgdUpdate(float* p, float* buf, const float* g, int64_t n, float l1, float l2, float lr, float weight_decay,
               float momentum) {
  if (l1 != 0.0f || l2 != 0.0f) return Sgd<true>(p, buf, g, n, l1, 2.0f * l2, lr, weight_decay, momentum);
  Sgd<false>(p, buf, g, n, l1, 0.0f, lr, weight_decay, momentum);
}

}  // namespace ens
