// OptimizerKernel: one member's Adam / AdamW or SGD update on raw float32 arrays, for
// PackOptimizer's CPU path (pack_optimizer.h has the formulas and why they are per member).
//
// A pack's optimizer step was a dozen libtorch kernels per parameter over the whole pack, each
// a few microseconds of dispatch and allocation for a few thousand elements; here it is one
// pass over each member's slice. Every element gets the same operations in the same order, so
// the result does not depend on the pack, and the loops vectorise without reassociating
// anything (compiled at -O3 without errno for sqrt, the same in every build).
// No libtorch. Thread-compatible.
#pragma once

#include <cstdint>

namespace ens {

// Both updates take the L1/L2 penalty of the member's kernels as gradient terms first:
// g += l1 * sign(p) + 2 * l2 * p (the gradient of l1 |p| + l2 p^2), skipped when both are 0.

// Adam over n elements: p *= decay (AdamW's 1 - lr * wd; 1 for Adam, which is exact);
// m = m * b1 + g * (1 - b1); v = v * b2 + g * g * (1 - b2);
// p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), with step_size = lr / (1 - b1^t) and
// bc2_sqrt = sqrt(1 - b2^t) of the member's own step count t.
void AdamUpdate(float* p, float* m, float* v, const float* g, int64_t n, float l1, float l2, float decay,
                float step_size, float bc2_sqrt);

// SGD with momentum over n elements: d = g + wd * p; buf = buf * momentum + d; p -= lr * buf.
void SgdUpdate(float* p, float* buf, const float* g, int64_t n, float l1, float l2, float lr, float weight_decay,
               float momentum);

}  // namespace ens
