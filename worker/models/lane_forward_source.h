// LaneForwardSource: a lane member's forward as TorchScript, operation for operation the lane
// kernel's (worker/kernels/lane_kernel.h LaneForwardRows), so the member's module, its export and
// every caller that runs the module get the bits the kernel computes.
//
// Why it exists (issue 61 item 2): a member the lane kernel trains predicted through its
// layers' GEMMs (torch.addmm), whose sums run in the BLAS's order, not the kernel's; its
// predictions were the same on every device only because they all ran on the CPU, and each
// member paid a GEMM and libtorch's activations per block. Here every layer is
// z = b + h_0 w_0 + h_1 w_1 + ... in input order (one multiplication and one addition per term,
// each an exactly rounded elementwise operator) and every activation is the kernel's own
// (its e^x by Cody-Waite and a Taylor series, then times 2^n, which the kernel writes into the
// exponent bits and the module takes from torch.exp2 of the integer n, exactly; tanh, sigmoid
// and erf from it), with the kernel's constants written as the exact float values. libtorch's
// CPU elementwise operators round each result once (an addition with alpha 1 is a fused
// multiply-add of 1: exact), so the module's bits are the kernel's
// (tests/trainer_eager_prediction_test.cpp, every activation and both heads).
//
// A member's forward source is stored in its weights.bin: a member recorded before this form
// keeps its GEMM forward whenever its module is built. Pure text; no libtorch. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/config/member_options.h"

namespace ens {

// The statements of the forward (`h` standardised features -> the network's outputs), for a
// member with tensors layer<l>_weight [out, in] and layer<l>_bias [out], l < layers, and these
// hidden activations (layers - 1 of them). They call the methods of LaneMethodsSource.
std::string LaneForwardSource(size_t layers, const std::vector<Activation>& activations);

// The module methods the statements call: lane_linear, lane_exp, and one per activation.
const std::string& LaneMethodsSource();

// Whether a forward source calls them (its module needs LaneMethodsSource).
bool UsesLaneMethods(const std::string& forward_source);

}  // namespace ens
