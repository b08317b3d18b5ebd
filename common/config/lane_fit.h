// LaneFits: whether the lane kernel (worker/kernels/lane_kernel.h) trains a member, decided from what
// the member and the run are, never from the device: the supervisor's pack plan and the
// worker's trainer ask the same question and get the same answer on every machine, so a
// member takes the same engine, with the same bits, on the CPU and on a GPU.
//
// The kernel trains MLP members of one regression target with a loss it takes (LossTraits::lane),
// of at most kLaneMaxLayers layers (hidden + output) and kLaneMaxWeights weights, every
// activation, dropout, adversarial training. Pure. Thread-safe. Light enough for nvcc
// (lane_kernel.h includes it for the layer bound).
#pragma once

#include <cstdint>

namespace ens {

struct MemberSpec;

constexpr int kLaneMaxLayers = 8;

// The most weights (multiply-adds per row over all layers) a lane-trained member may have.
// Measured on the CPU (BENCHMARKS.md "Training loop throughput" and "Where the lanes stop",
// batch 32, K = 512, in-loop member-steps/s of the lanes against the autograd loop's GEMMs):
// 9 -> U sigmoid -> 1: 2.0x at 60 weights, 2.2x at 240, 1.6x at 320, 2.1x at 640 and 1280,
// 1.8x at 2560; configs/example.json's members: 3 x 32 tanh (2,368) 1.53x, 2 x 64 relu
// (4,736) 0.89x. The cap covers both example members: a member the lanes train has the same
// bits on every device (the first promise), which is worth 11 % of CPU speed at 4,736 weights;
// above the cap, where the GEMMs pull further ahead, the GEMM path stays.
constexpr int64_t kLaneMaxWeights = 5120;

// `classes` 0 for regression; `targets` the run's regression targets; `features` its inputs.
bool LaneFits(const MemberSpec& m, int classes, int targets, int features);

}  // namespace ens
