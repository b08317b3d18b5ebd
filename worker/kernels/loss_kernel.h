// LossKernel: the huber loss of standardised errors and its gradient on the CPU, on raw
// float32 arrays, in one pass each.
//
// Bit for bit what libtorch's autograd computes for the expression the objective used before
// (and still uses on a GPU): where(|e| <= d, 0.5 * e * e, d * (|e| - 0.5 * d)). The loss is the
// same float operations in the same order. The gradient repeats the graph's backward: for
// |e| <= d, the two products' terms g (0.5 e) + (g e) 0.5; otherwise (g d) sgn(e); plus the
// other branch's terms, which are zeros, so that even the sign of a zero gradient is the one
// autograd gave. So a run trained before this kernel existed retrains (`verify`, resume) to the
// same bits.
//
// Why it exists (issue 34 item 3): on [512, 32] errors the expression was eight libtorch
// kernels forward and about ten backward, the scalar `where` kernel alone 10 % of a fused
// pack's training loop on an Intel Xeon.
//
// Layout: e and the results [members, per_member] contiguous; delta [members] (huber_delta,
// one per member). No libtorch: worker/train/objective.cpp wraps it in an autograd function.
#pragma once

#include <cstdint>

namespace ens {

// loss[k, i] = huber(e[k, i]; delta[k]).
void HuberForward(const float* e, const float* delta, int64_t members, int64_t per_member, float* loss);
// grad_e[k, i] = d loss[k, i] / d e[k, i] times grad[k, i], as autograd composes it.
void HuberBackward(const float* e, const float* delta, const float* grad, int64_t members, int64_t per_member,
                   float* grad_e);

}  // namespace ens
