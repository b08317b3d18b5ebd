// LaneKernel: the training steps of 16 small MLP members side by side, one member per float
// lane of a 16-float vector (a 512-bit register; two 256-bit or four 128-bit ones on smaller
// ISAs), on raw float32 arrays.
//
// Why it exists (issue 52 item 1): a seed-000 member (9 -> 6 -> 1, batch 32) is too small for
// its own rows to fill a vector register: FusedMlp (mlp_kernel.h) leaves most lanes idle and
// the autograd loop around it costs more than the arithmetic. Here one block of 16 members
// runs gather and standardisation, forward, the loss and its closed-form gradient, backward,
// L1/L2 and the optimizer update for every step of a window without leaving the kernel.
//
// Bits: every lane computes its own member's numbers with one fixed sequence of scalar IEEE
// float operations (no FMA: the block code is compiled with -ffp-contract=off; e^x is the
// kernel's own, the same Cody-Waite and Taylor steps as mlp_kernel.cpp's; sqrt and division
// are exactly rounded on every ISA). So a member's bits do not depend on its lane, its block,
// its pack mates or the ISA or device the block code was compiled for; NaN excepted: which NaN
// (payload, sign) an operation on NaNs returns is the hardware's and the operand order's, and
// a member that reaches NaN fails as non-finite anyway. Sums over the batch run in row
// order, one accumulator per weight; loss and metric sums are double, a batch summed from 0 in
// row order and then added to the epoch's (as Objective::RowSums and the autograd loop add them).
//
// The block code is one source, lane_kernel_body.inc, compiled for every device it runs on:
// three times as vector lanes (lane_kernel_{baseline,avx2,avx512}.cpp: baseline x86-64 (SSE2),
// AVX2 and AVX-512F) and twice as one member a thread: for CUDA (lane_kernel_cuda.cu, where a
// member is a CUDA thread) and for the host (lane_kernel_thread.cpp, LaneIsa::kThread: the
// CUDA threads' own function, run here lane after lane, so the CPU tests check the bits a GPU
// computes). LaneTrainWindow runs the best vector ISA this CPU has, or the one
// ENSEMBLED_LANE_ISA names (baseline, avx2, avx512, thread: a test hook that checks every
// form gives the same bits; a level the CPU lacks falls back to the best).
//
// Layout: every per-lane quantity is [..][16] floats (lane j last). A block's parameters P
// floats per lane: for each layer l its weights [O_l][I_l] (row-major, as the model's
// [K, O, I]) then its biases [O_l]; Adam's moments (SGD: m is the momentum buffer) alike.
// No libtorch. Thread-compatible: blocks are independent, each call touches one block's arrays.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/lane_fit.h"  // kLaneMaxLayers, and which members the kernel trains
#include "common/config/member_options.h"

namespace ens {

constexpr int kLaneWidth = 16;

// The MLPs the kernel trains: regression on one target with mse, mae, huber, or gaussian_nll
// (two outputs: the mean and the variance's raw value); every activation (tanh, gelu, the
// sigmoid and softplus by the kernel's own e^x, ln and erf, never libm's); fast-gradient-sign
// adversarial training. Plain data (no std:: members): the block code,
// compiled per ISA, must instantiate no inline library function that the linker could merge
// with another ISA's copy.
struct LaneNet {
  int64_t inputs = 0;                          // features
  int64_t layers = 0;                          // hidden layers + 1
  int64_t units[kLaneMaxLayers] = {};          // each hidden layer's, then the output layer's (LossTraits::outputs)
  Activation activations[kLaneMaxLayers] = {}; // one per hidden layer
  LossKind loss = LossKind::kHuber;            // one whose LossTraits::lane is true
  OptimizerKind optimizer = OptimizerKind::kAdam;
  bool adversarial = false;  // each step also trains on its rows moved by the lane's steps (kLaneHyperRows + 2F..)

  int64_t Params() const;         // P
  int64_t Weights() const;        // multiply-adds of a row's forward: the weights, not biases
  int64_t ScratchFloats() const;  // the scratch LaneTrainWindow needs
};

// Per-lane hyperparameters and standardisation of one block: rows of 16 floats.
enum LaneHyper : int64_t {
  kLaneLr,          // lr
  kLaneDecay,       // AdamW: 1 - lr * weight_decay; Adam: 1
  kLaneWeightDecay, // SGD's weight_decay
  kLaneMomentum,    // SGD's momentum
  kLaneL1,          // l1
  kLaneL2x2,        // 2 * l2
  kLanePenalty,     // 1 where l1 or l2 is not 0 (the member adds the terms), else 0
  kLaneDelta,       // huber_delta
  kLanePoison,      // 1, or NaN (the non-finite test hook, fault_injection.h)
  kLaneYMean,       // the target's mean and std
  kLaneYStd,
  kLaneHyperRows,   // then the features' means [F], stds [F] and adversarial steps [F] (0 without)
};

struct LaneBlock {
  float* params = nullptr;  // [P][16]
  float* m = nullptr;       // [P][16]
  float* v = nullptr;       // [P][16] (Adam, AdamW)
  const float* hyper = nullptr;  // [kLaneHyperRows + 3F][16]
  double* sums = nullptr;   // [3][16]: loss, |error|, error^2 (error in the target's units)
};

// One window of whole batches: position b of lane j is the row that starts at
// table[offsets[b][j]] (a row: features, then the target); steps of `batch` rows (the last
// may be shorter).
struct LaneWindow {
  const float* table = nullptr;
  const int64_t* offsets = nullptr;  // [len][16]
  int64_t len = 0, batch = 0;
  // Adam's bias corrections per step of the window and lane, [steps][2][16]:
  // float(1 - beta1^t) and float(sqrt(1 - beta2^t)) of the lane's step count t after it.
  const float* corrections = nullptr;
  // Dropout multipliers (0 or 1 / keep; 1 where a member does not drop out) of every hidden
  // unit, [len][hidden units of all layers][16] (adversarial: [len][2][hidden][16], the row's
  // forward's then its adversarial forward's), or null: no member of the pack drops out.
  const float* masks = nullptr;
  // false: forward, loss and metric sums only (validation: no masks, no poison, no update).
  bool train = true;
};

// kThread: the CUDA kernel's per-thread form compiled for the host (one lane at a time).
// A window of a whole pack's blocks, as one CUDA launch takes it (lane_launcher.h): block b's
// arrays start at block 0's plus b times their kind's stride (in elements). The CPU runs the
// same blocks one call of LaneTrainWindow each (lane_step.cpp).
struct LanePackWindow {
  LaneBlock first;    // block 0's parameters, moments, hyperparameters and sums
  LaneWindow window;  // block 0's offsets, corrections and masks; len, batch, train for all
  int64_t blocks = 0;
  int64_t param_stride = 0;       // params, m and v
  int64_t hyper_stride = 0;
  int64_t sums_stride = 0;
  int64_t offsets_stride = 0;
  int64_t corrections_stride = 0;
  int64_t masks_stride = 0;
  const uint8_t* running = nullptr;  // [blocks]: 0 skips the block (none of its members trains)
  float* scratch = nullptr;          // a launch's: [blocks * 16][scratch_per_thread]
  int64_t scratch_per_thread = 0;    // ScratchFloats() / 16: a lane's share
};
#if defined(__CUDACC__)
#define ENS_LANE_HD __host__ __device__
#else
#define ENS_LANE_HD
#endif
ENS_LANE_HD inline LaneBlock BlockAt(const LanePackWindow& pw, int64_t b) {
  LaneBlock x = pw.first;
  x.params += b * pw.param_stride;
  x.m += b * pw.param_stride;
  if (x.v != nullptr) x.v += b * pw.param_stride;
  x.hyper += b * pw.hyper_stride;
  x.sums += b * pw.sums_stride;
  return x;
}
ENS_LANE_HD inline LaneWindow WindowAt(const LanePackWindow& pw, int64_t b) {
  LaneWindow w = pw.window;
  w.offsets += b * pw.offsets_stride;
  if (w.corrections != nullptr) w.corrections += b * pw.corrections_stride;
  if (w.masks != nullptr) w.masks += b * pw.masks_stride;
  return w;
}

enum class LaneIsa { kBaseline, kAvx2, kAvx512, kThread };
const char* Name(LaneIsa isa);
// What this CPU runs: its best vector ISA, or ENSEMBLED_LANE_ISA's form where the CPU has it.
LaneIsa ChosenLaneIsa();
// The forms this CPU can run: baseline first, then the wider vector ISAs it has, kThread last.
std::vector<LaneIsa> AvailableLaneIsas();

// Every step of the window for one block with the block code of `isa` (w.train false: the
// forward and the sums only, for validation; the forward is FusedMlp's operations in its order).
// REQUIRES: isa in AvailableLaneIsas(); scratch holds net.ScratchFloats() floats, 64-byte aligned.
void LaneTrainWindow(LaneIsa isa, const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch);

// A lane member's predictions (issue 61 item 2): n rows of standardised features x (row stride
// x_stride floats) through one member's network, out[r][u] for u < the output units (1, or 2 for
// gaussian_nll: the network's outputs, before the head). `params` [P] is the member's own
// parameters in a block's per-lane layout without the lanes (each layer's weights [O][I]
// row-major, then its biases [O]). The rows run side by side in the lanes, the member's
// parameters broadcast, through the training forward's operations in its order (no masks): a
// row's outputs are the bits the member's lane computes for it in training, on every ISA and
// whatever the row's neighbours. This is the definition of a lane member's prediction: its
// module's TorchScript forward spells the same operations (worker/models/lane_forward_source.h).
// REQUIRES: isa in AvailableLaneIsas(); scratch holds net.ScratchFloats() floats, 64-byte aligned.
void LaneForwardRows(LaneIsa isa, const LaneNet& net, const float* params, const float* x, int64_t x_stride, int64_t n,
                     float* out, float* scratch);

// One launch's threads run on this CPU in turn: LaunchThread of the thread form for every
// thread of a CUDA launch over `pw` (w.scratch laid out as the device's), what each CUDA thread
// computes. REQUIRES: pw's pointers on the host.
void LaneLaunchOnHost(const LaneNet& net, const LanePackWindow& pw);

}  // namespace ens
