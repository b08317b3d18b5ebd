// LaneFits: whether the lane kernel (worker/lane_kernel.h) trains a member, decided from what
// the member and the run are, never from the device: the supervisor's pack plan and the
// worker's trainer ask the same question and get the same answer on every machine, so a
// member takes the same engine, with the same bits, on the CPU and on a GPU.
//
// The kernel trains MLP members of one regression target with mse, mae, huber or gaussian_nll,
// of at most kLaneMaxLayers layers (hidden + output) and kLaneMaxWeights weights, every
// activation, dropout, adversarial training. Pure. Thread-safe. Light enough for nvcc
// (lane_kernel.h includes it for the layer bound).
#pragma once

#include <cstdint>

namespace ens {

struct MemberSpec;

constexpr int kLaneMaxLayers = 8;

// The most weights (multiply-adds per row over all layers) a lane-trained member may have.
// Measured (BENCHMARKS.md "Training loop throughput", 9 -> U sigmoid -> 1, batch 32, K = 512,
// 4 epochs, in-loop member-steps/s against the autograd loop): 2.0x at U = 6 (60 weights, FusedMlp), 2.2x
// at 240, 1.6x at 320 (per-member GEMMs from here), 2.1x at 640 and 1280, 1.8x at 2560. The
// lanes' cost grows with the weights, the GEMMs' per weight falls with width, so above the
// last measured point where they clearly win the GEMM path stays.
constexpr int64_t kLaneMaxWeights = 2048;

// `classes` 0 for regression; `targets` the run's regression targets; `features` its inputs.
bool LaneFits(const MemberSpec& m, int classes, int targets, int features);

}  // namespace ens
