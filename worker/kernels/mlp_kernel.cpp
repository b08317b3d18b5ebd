#include "worker/kernels/mlp_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ens {
namespace {

constexpr int kLanes = 8;  // the partial sums of a sum over the batch
constexpr float kSqrtHalf = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;

// zT [O, B] = bias + W [O, I] hT [I, B], each sum from the bias up in the order of i.
void Affine(int64_t O, int64_t I, int64_t B, const float* __restrict__ w, const float* __restrict__ bias,
            const float* __restrict__ hT, float* __restrict__ zT) {
  for (int64_t o = 0; o < O; ++o) {
    float* __restrict__ z = zT + o * B;
    std::fill(z, z + B, bias[o]);
    for (int64_t i = 0; i < I; ++i) {
      const float wv = w[o * I + i];
      const float* __restrict__ h = hT + i * B;
      for (int64_t b = 0; b < B; ++b) z[b] += wv * h[b];
    }
  }
}

// gT [I, B] = W [O, I]^T gzT [O, B], each sum in the order of o.
void AffineInputGrad(int64_t O, int64_t I, int64_t B, const float* __restrict__ w, const float* __restrict__ gzT,
                     float* __restrict__ gT) {
  for (int64_t i = 0; i < I; ++i) {
    float* __restrict__ g = gT + i * B;
    std::fill(g, g + B, 0.0f);
    for (int64_t o = 0; o < O; ++o) {
      const float wv = w[o * I + i];
      const float* __restrict__ gz = gzT + o * B;
      for (int64_t b = 0; b < B; ++b) g[b] += wv * gz[b];
    }
  }
}

// Sum over b of a[b] * c[b] (c null: of a[b]) in kLanes partial sums, added in a fixed order.
float BatchSum(const float* __restrict__ a, const float* __restrict__ c, int64_t n) {
  float acc[kLanes] = {};
  int64_t b = 0;
  if (c != nullptr) {
    for (; b + kLanes <= n; b += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += a[b + j] * c[b + j];
    for (int j = 0; b < n; ++b, ++j) acc[j] += a[b] * c[b];
  } else {
    for (; b + kLanes <= n; b += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += a[b + j];
    for (int j = 0; b < n; ++b, ++j) acc[j] += a[b];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// e^x in float without a library call, so that a loop of it vectorises: x = n ln2 + r with
// |r| <= ln2 / 2 (Cody-Waite, ln2 in two parts), e^r by its Taylor series to r^6 (relative error
// below 2e-7), times 2^n built in the exponent bits. x is clamped to [-87, 88], where 2^n is a
// normal float; NaN stays NaN. Every element the same operations in the same order, whatever
// the vector width.
inline float Exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

float Sigmoid(float z) { return 1.0f / (1.0f + Exp(-z)); }

// y [n] = act(z [n]).
void Activate(Activation act, const float* __restrict__ z, float* __restrict__ y, int64_t n) {
  switch (act) {
    case Activation::kRelu:
      for (int64_t e = 0; e < n; ++e) y[e] = z[e] > 0.0f || z[e] != z[e] ? z[e] : 0.0f;  // NaN stays NaN
      return;
    case Activation::kTanh:
      for (int64_t e = 0; e < n; ++e) y[e] = std::tanh(z[e]);
      return;
    case Activation::kSigmoid:
      for (int64_t e = 0; e < n; ++e) y[e] = Sigmoid(z[e]);
      return;
    case Activation::kSwish:
      for (int64_t e = 0; e < n; ++e) y[e] = z[e] * Sigmoid(z[e]);
      return;
    case Activation::kGelu:  // the exact (erf) form
      for (int64_t e = 0; e < n; ++e) y[e] = 0.5f * z[e] * (1.0f + std::erf(z[e] * kSqrtHalf));
      return;
    case Activation::kLinear:
      std::copy(z, z + n, y);
      return;
  }
}

// g [n] *= act'(z) (y = act(z)).
void ScaleByDerivative(Activation act, const float* __restrict__ z, const float* __restrict__ y, float* __restrict__ g,
                       int64_t n) {
  switch (act) {
    case Activation::kRelu:
      for (int64_t e = 0; e < n; ++e) g[e] = z[e] > 0.0f ? g[e] : 0.0f;
      return;
    case Activation::kTanh:
      for (int64_t e = 0; e < n; ++e) g[e] *= 1.0f - y[e] * y[e];
      return;
    case Activation::kSigmoid:
      for (int64_t e = 0; e < n; ++e) g[e] *= y[e] * (1.0f - y[e]);
      return;
    case Activation::kSwish:
      for (int64_t e = 0; e < n; ++e) {
        const float s = Sigmoid(z[e]);
        g[e] *= s * (1.0f + z[e] * (1.0f - s));
      }
      return;
    case Activation::kGelu:
      for (int64_t e = 0; e < n; ++e) {
        const float cdf = 0.5f * (1.0f + std::erf(z[e] * kSqrtHalf));
        g[e] *= cdf + z[e] * kInvSqrt2Pi * std::exp(-0.5f * z[e] * z[e]);
      }
      return;
    case Activation::kLinear:
      return;
  }
}

// dstT [C, R] = src [R, C] (one member's slice).
void Transpose(const float* __restrict__ src, int64_t R, int64_t C, float* __restrict__ dstT) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) dstT[c * R + r] = src[r * C + c];
}

// hT [U, B] = aT [U, B] times the mask of member slice m [B, U] (transposed on the fly).
void ApplyMask(const float* __restrict__ aT, const float* __restrict__ m, int64_t U, int64_t B, float* __restrict__ hT) {
  for (int64_t u = 0; u < U; ++u)
    for (int64_t b = 0; b < B; ++b) hT[u * B + b] = aT[u * B + b] * m[b * U + u];
}

// Where member k's tape keeps what: xT [I, B], then per hidden layer zT and aT [U, B].
struct Tape {
  const MlpShape& s;
  int64_t XT() const { return 0; }
  int64_t ZT(int64_t l) const {
    int64_t at = s.inputs * s.batch;
    for (int64_t j = 0; j < l; ++j) at += 2 * s.units[j] * s.batch;
    return at;
  }
  int64_t AT(int64_t l) const { return ZT(l) + s.units[l] * s.batch; }
};

int64_t MaxUnits(const MlpShape& s) { return std::max(s.inputs, *std::max_element(s.units.begin(), s.units.end())); }

}  // namespace

int64_t MlpShape::TapeFloats() const {
  int64_t n = inputs * batch;
  for (int64_t l = 0; l + 1 < Layers(); ++l) n += 2 * units[l] * batch;
  return n;
}

void MlpForward(const MlpShape& s, const MlpParams& p, const float* x, float* out, float* tape, int64_t first,
                int64_t last) {
  const int64_t B = s.batch, L = s.Layers(), O = s.units[L - 1], per = s.TapeFloats();
  const Tape at{s};
  std::vector<float> own(tape == nullptr ? per : 0), h(MaxUnits(s) * B), z(O * B);
  for (int64_t k = first; k < last; ++k) {
    float* t = tape != nullptr ? tape + k * per : own.data();
    Transpose(x + k * B * s.inputs, B, s.inputs, t + at.XT());
    const float* in = t + at.XT();
    for (int64_t l = 0; l < L; ++l) {
      const int64_t I = s.LayerInputs(l), U = s.units[l];
      const float* w = p.weights[l] + k * U * I;
      const float* bias = p.biases[l] + k * U;
      if (l + 1 == L) {
        Affine(U, I, B, w, bias, in, z.data());
        Transpose(z.data(), U, B, out + k * B * U);
        break;
      }
      float* zT = t + at.ZT(l);
      float* aT = t + at.AT(l);
      Affine(U, I, B, w, bias, in, zT);
      Activate(s.activations[l], zT, aT, U * B);
      if (p.masks[l] != nullptr) {
        ApplyMask(aT, p.masks[l] + k * B * U, U, B, h.data());
        in = h.data();
      } else {
        in = aT;
      }
    }
  }
}

void MlpBackward(const MlpShape& s, const MlpParams& p, const float* tape, const float* grad_out,
                 const std::vector<float*>& grad_weights, const std::vector<float*>& grad_biases, float* grad_x,
                 int64_t first, int64_t last) {
  const int64_t B = s.batch, L = s.Layers(), per = s.TapeFloats(), wide = MaxUnits(s) * B;
  const Tape at{s};
  std::vector<float> gz(wide), gin(wide), h(wide);
  for (int64_t k = first; k < last; ++k) {
    const float* t = tape + k * per;
    Transpose(grad_out + k * B * s.units[L - 1], B, s.units[L - 1], gz.data());
    for (int64_t l = L - 1; l >= 0; --l) {
      const int64_t I = s.LayerInputs(l), U = s.units[l];
      // This layer's input, as the forward fed it.
      const float* in = t + at.XT();
      if (l > 0) {
        in = t + at.AT(l - 1);
        if (p.masks[l - 1] != nullptr) {
          ApplyMask(in, p.masks[l - 1] + k * B * I, I, B, h.data());
          in = h.data();
        }
      }
      float* gw = grad_weights[l] + k * U * I;
      float* gb = grad_biases[l] + k * U;
      for (int64_t o = 0; o < U; ++o) {
        gb[o] = BatchSum(gz.data() + o * B, nullptr, B);
        for (int64_t i = 0; i < I; ++i) gw[o * I + i] = BatchSum(gz.data() + o * B, in + i * B, B);
      }
      if (l == 0 && grad_x == nullptr) break;
      AffineInputGrad(U, I, B, p.weights[l] + k * U * I, gz.data(), gin.data());
      if (l == 0) {
        Transpose(gin.data(), I, B, grad_x + k * B * I);
        break;
      }
      if (p.masks[l - 1] != nullptr) {
        const float* m = p.masks[l - 1] + k * B * I;
        for (int64_t u = 0; u < I; ++u)
          for (int64_t b = 0; b < B; ++b) gin[u * B + b] *= m[b * I + u];
      }
      ScaleByDerivative(s.activations[l - 1], t + at.ZT(l - 1), t + at.AT(l - 1), gin.data(), I * B);
      gz.swap(gin);
    }
  }
}

void GatherStandardised(const float* table, int64_t stride, const int64_t* rows, int64_t rows_k, int64_t rows_b,
                        int64_t members, int64_t len, int64_t features, int64_t targets, const float* mean,
                        const float* sd, float* x, float* y) {
  for (int64_t k = 0; k < members; ++k) {
    const float* __restrict__ m = mean + k * features;
    const float* __restrict__ d = sd + k * features;
    for (int64_t b = 0; b < len; ++b) {
      const float* __restrict__ row = table + rows[k * rows_k + b * rows_b] * stride;
      float* __restrict__ xr = x + (k * len + b) * features;
      for (int64_t c = 0; c < features; ++c) xr[c] = (row[c] - m[c]) / d[c];
      float* __restrict__ yr = y + (k * len + b) * targets;
      for (int64_t t = 0; t < targets; ++t) yr[t] = row[features + t];
    }
  }
}

}  // namespace ens
