#include "worker/kernels/predict_rows_kernel.h"

namespace ens {

void StandardiseRows(const float* src, int64_t src_stride, int64_t n, int64_t f, const float* mean,
                     const float* std, float* dst, int64_t dst_stride, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    float* d = dst + r * dst_stride;
    if (r < n) {
      const float* s = src + r * src_stride;
      for (int64_t c = 0; c < f; ++c) {
        const float centred = s[c] - mean[c];
        d[c] = centred / std[c];
      }
    } else {
      for (int64_t c = 0; c < f; ++c) {
        const float centred = 0.0f - mean[c];
        d[c] = centred / std[c];
      }
    }
  }
}

void CopyRows(const float* src, int64_t src_stride, int64_t rows, int64_t w, float* dst, int64_t dst_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < w; ++c) dst[r * dst_stride + c] = src[r * src_stride + c];
}

void AffineRows(const float* h, int64_t h_stride, int64_t n, int64_t t, const float* scale, const float* shift,
                float* out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < t; ++j) {
      const float scaled = h[r * h_stride + j] * scale[j];
      out[r * t + j] = scaled + shift[j];
    }
}

}  // namespace ens
