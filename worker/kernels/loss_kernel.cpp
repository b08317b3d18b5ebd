#include "worker/kernels/loss_kernel.h"

#include <cmath>

namespace ens {

void HuberForward(const float* __restrict__ e, const float* __restrict__ delta, int64_t members, int64_t per_member,
                  float* __restrict__ loss) {
  for (int64_t k = 0; k < members; ++k) {
    const float d = delta[k], half_d = 0.5f * d;
    const float* __restrict__ ek = e + k * per_member;
    float* __restrict__ lk = loss + k * per_member;
    for (int64_t i = 0; i < per_member; ++i) {
      const float v = ek[i], a = std::fabs(v);
      const float inner = (0.5f * v) * v, outer = d * (a - half_d);
      lk[i] = a <= d ? inner : outer;
    }
  }
}

void HuberBackward(const float* __restrict__ e, const float* __restrict__ delta, const float* __restrict__ grad,
                   int64_t members, int64_t per_member, float* __restrict__ grad_e) {
  for (int64_t k = 0; k < members; ++k) {
    const float d = delta[k];
    const float* __restrict__ ek = e + k * per_member;
    const float* __restrict__ gk = grad + k * per_member;
    float* __restrict__ out = grad_e + k * per_member;
    for (int64_t i = 0; i < per_member; ++i) {
      const float v = ek[i], g = gk[i];
      const bool inside = std::fabs(v) <= d;
      // where's backward: the grad to the branch taken, a zero to the other.
      const float g_inner = inside ? g : 0.0f, g_outer = inside ? 0.0f : g;
      // (0.5 e) * e: to e as the right factor, then through 0.5 * e as the left one.
      const float t1 = g_inner * (0.5f * v), t2 = (g_inner * v) * 0.5f;
      // d * (|e| - 0.5 d): to |e| unchanged by the subtraction, then abs's g * sgn(e).
      const float sgn = static_cast<float>(v > 0.0f) - static_cast<float>(v < 0.0f);
      const float t3 = (g_outer * d) * sgn;
      out[i] = (t1 + t2) + t3;
    }
  }
}

}  // namespace ens
