// MlpKernel: a fused packed MLP on the CPU, forward and backward, on raw float32 arrays.
//
// Member k's numbers are computed from its own slices only, one member after the other, each
// with the same fixed order of operations: its outputs and gradients are the same bits in a
// pack of any size (and alone). Inside a member every product runs over the batch as the
// innermost, contiguous loop (activations are kept transposed, [units, batch]), so the
// compiler vectorises it without reassociating a sum; the sums over the batch (weight and bias
// gradients) use 8 fixed partial sums added in a fixed order.
//
// Why it exists (issue 34 item 3): a pack of 512 tiny members (9 -> 6 -> 1, batch 32) spent
// most of its training loop in per-member BLAS calls of a few hundred multiply-adds each, and
// in one libtorch kernel per layer, activation and bias for the whole pack. Here a member's
// forward or backward is one pass over a few KiB that stay in the L1 cache.
//
// Layout (all contiguous, K members): x [K, B, I]; layer l's weights [K, O_l, I_l] and biases
// [K, O_l] (a [K, 1, O_l] tensor is the same memory); dropout masks of hidden layer l
// [K, B, O_l] or null (the value multiplies the activation: 0 or 1 / keep); output [K, B, O_last].
//
// No libtorch: worker/models/mlp_model.cpp wraps it in an autograd function. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/config/member_options.h"

namespace ens {

struct MlpShape {
  int64_t members = 0;                  // K
  int64_t batch = 0;                    // B
  int64_t inputs = 0;                   // I (features)
  std::vector<int64_t> units;           // each layer's outputs: the hidden layers', then the output layer's
  std::vector<Activation> activations;  // one per hidden layer (units.size() - 1)

  int64_t Layers() const { return static_cast<int64_t>(units.size()); }
  int64_t LayerInputs(int64_t l) const { return l == 0 ? inputs : units[l - 1]; }
  // Floats a member's forward keeps for its backward (MlpForward's `tape`).
  int64_t TapeFloats() const;
};

struct MlpParams {
  std::vector<const float*> weights;  // per layer, [K, O, I]
  std::vector<const float*> biases;   // per layer, [K, O]
  std::vector<const float*> masks;    // per hidden layer, [K, B, O], or null (no member drops out)
};

// out [K, B, O_last] = the MLP of x, for members [first, last) (their slices only: disjoint
// ranges may run on different threads). With `tape` (K * shape.TapeFloats() floats) it keeps
// what MlpBackward needs; null when no backward follows.
void MlpForward(const MlpShape& shape, const MlpParams& p, const float* x, float* out, float* tape, int64_t first,
                int64_t last);

// Gradients of sum(out * grad_out) after MlpForward with the same shape, parameters, masks
// and tape: each layer's weight [K, O, I] and bias [K, O] gradients (overwritten), and x's
// [K, B, I] when grad_x is not null; for members [first, last).
void MlpBackward(const MlpShape& shape, const MlpParams& p, const float* tape, const float* grad_out,
                 const std::vector<float*>& grad_weights, const std::vector<float*>& grad_biases, float* grad_x,
                 int64_t first, int64_t last);

// A batch's inputs for the kernel from a table of rows [n, stride] (features, then targets):
// for member k and position b, row r = rows[k * rows_k + b * rows_b]; x [K, len, F] =
// (table[r][c] - mean[k][c]) / sd[k][c] in float, y [K, len, T] = table[r][F + t]. The same
// bits as the elementwise subtraction and division (one IEEE operation each), vectorised over
// the features.
void GatherStandardised(const float* table, int64_t stride, const int64_t* rows, int64_t rows_k, int64_t rows_b,
                        int64_t members, int64_t len, int64_t features, int64_t targets, const float* mean,
                        const float* sd, float* x, float* y);

}  // namespace ens
