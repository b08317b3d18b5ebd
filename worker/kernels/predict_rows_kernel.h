// PredictRowsKernel: the plain loops of a member's eager prediction (worker/predict/checkpoint.h
// PredictRows on MemberParts), for the steps between its libtorch operators.
//
// A member's forward (its module's forward_block, docs/internals.md "Batch-independent
// predictions") standardises a block of rows, copies each statement's input to rows of a
// 16-float stride, runs the statements (GEMMs and activations: libtorch's, kept) and applies
// the head. The standardisation, the copies and a regression head are exactly rounded IEEE
// operations (one subtraction then one division; one multiplication then one addition), so
// these loops give the module's bits without an operator's dispatch each: a member's
// prediction runs its statements' operators and no others (a member with two hidden layers:
// 15 for 3 blocks, against 62 by operators). This file is compiled with -ffp-contract=off
// (CMakeLists.txt): a fused multiply-add would round once where the module rounds twice.
// Pure functions on caller-owned memory; thread-safe.
#pragma once

#include <cstdint>

namespace ens {

// dst row r (row stride dst_stride floats), columns [0, f): (src[r][c] - mean[c]) / std[c] for
// the n rows of src (row stride src_stride); rows [n, rows) standardise a zero row (the block's
// padding). REQUIRES: n <= rows, f <= dst_stride.
void StandardiseRows(const float* src, int64_t src_stride, int64_t n, int64_t f, const float* mean,
                     const float* std, float* dst, int64_t dst_stride, int64_t rows);

// dst row r (row stride dst_stride), columns [0, w) = src row r (row stride src_stride), rows
// [0, rows). REQUIRES: w <= dst_stride.
void CopyRows(const float* src, int64_t src_stride, int64_t rows, int64_t w, float* dst, int64_t dst_stride);

// out[r * t + j] = h[r * h_stride + j] * scale[j] + shift[j] for rows [0, n), targets [0, t):
// a regression head (target units from the standardised output).
void AffineRows(const float* h, int64_t h_stride, int64_t n, int64_t t, const float* scale, const float* shift,
                float* out);

}  // namespace ens
