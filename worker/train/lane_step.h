// LaneStep: the CPU's training step for packs of small MLP members, 16 members side by side in
// the lanes of a vector register (lane_kernel.h), without autograd or libtorch in the loop.
//
// A pack of K members is laid out as ceil(K / 16) blocks of 16 lanes; a block's last lanes
// beyond K are inert copies of its first member (computed, never read). For an epoch the
// pack's parameters, optimizer moments, hyperparameters and standardisation live in lane
// layout; each window of whole batches (trainer.cpp: the epoch's row order in windows) runs
// every step of every block with a running member inside the kernel: gather and standardise,
// forward, the loss's closed-form gradient, backward, L1/L2 and the optimizer update. Blocks
// spread over the intra-op threads (a member's numbers do not depend on the split). After the
// epoch the parameters go back to the model's tensors (validation, snapshots and checkpoints
// read them there) and the loss and metric sums to the caller's [K] doubles.
//
// Bits: a member's numbers are the same alone (a block padded with copies of it), packed, in
// any block position and under every ISA the kernel is compiled for (lane_kernel.h), and
// differ from the autograd loop's (FusedMlp, PackOptimizer) only by float rounding: the
// forward and the optimizer are the same operations, the backward sums over the batch in row
// order instead of FusedMlp's 8 partial sums (tests/trainer_lane_step_test.cpp).
// Dropout: the model's own masks (its stream, one draw per hidden layer with dropout and
// step, as the autograd loop draws them), laid into lanes a window at a time. Warm start: a
// member's moments and its own step count for Adam's bias correction, as PackOptimizer's.
// Used by the trainer (TrainPath::kByDevice) where LaneStepFits: on the CPU in its vector lanes,
// and on a GPU through a LaneLauncher (lane_launcher.h: the same block code, one member a CUDA
// thread, one launch a window). On a device the lane state lives there between windows: a
// window copies its row offsets, corrections, masks and the running blocks over (before the
// launch, asynchronously), an epoch's end reads the sums and parameters back (one sync); the
// bits are the CPU's. Every other pack keeps PackStep or the autograd loop. Includes
// libtorch. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "common/config/config.h"
#include "worker/device/device_runtime.h"
#include "worker/kernels/lane_kernel.h"
#include "worker/device/lane_launcher.h"
#include "worker/models/model.h"
#include "worker/train/pack_optimizer.h"
#include "worker/train/pack_step.h"

namespace ens {

// Whether LaneStep trains a pack of these members with `features` inputs: each LaneFits
// (common/config/lane_fit.h; the supervisor's pack plan asks the same).
// Depends only on what a pack shares (PackKey) and the run's data, so a member takes the same
// path alone and in any pack.
bool LaneStepFits(const std::vector<const MemberSpec*>& specs, int classes, int targets, int features);

class LaneStep {
 public:
  // Takes the model's current parameters; step_offsets as PackOptimizer's (steps each member
  // took before this pack; empty: none). launcher null: the CPU's vector lanes (REQUIRES CPU
  // tensors); else every window is one launch of `launcher` on rt's device, where the model's
  // tensors and the row table are (REQUIRES rt). REQUIRES: LaneStepFits; model.Layers() has a value.
  LaneStep(Model& model, const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm,
           const std::vector<int64_t>& step_offsets, LaneLauncher* launcher = nullptr, DeviceRuntime* rt = nullptr);

  // The test hook's NaN per member (trainer.cpp PoisonMask) [K], or undefined.
  void SetPoison(const torch::Tensor& poison);
  // A warm member's moments, shaped as PackOptimizer::MemberMoments gives them.
  void SetMemberMoments(int64_t k, const PackOptimizer::Moments& s);
  // (With a launcher, the first call after training brings the lane state back to the host.)
  PackOptimizer::Moments MemberMoments(int64_t k);
  int64_t MemberSteps(int64_t k) const { return offsets_[static_cast<size_t>(k)] + steps_; }

  // Every step of a window of whole batches: ix [K, len] row indices of `all` [N, F + 1]
  // (contiguous float32). Blocks none of whose members run (running[k]) are skipped.
  void Window(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch, const std::vector<bool>& running);
  // After an epoch's windows: adds each member's loss and metric sums (mae, mse in the
  // target's units) to loss_sum [K] and sums[i] [K] (double) and writes the parameters back
  // into the model's tensors.
  void EndEpoch(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums);
  // Validation with the parameters as the epoch left them: a window of whole batches of
  // validation rows, forward only (the same operations, in the same order, as FusedMlp's
  // forward and the objective's loss and metrics); EndValidation adds the sums as EndEpoch does.
  void Validate(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch, const std::vector<bool>& running);
  void EndValidation(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums);

 private:
  void RunWindow(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch, const std::vector<bool>& running,
                 bool train);
  void MoveSums(torch::Tensor& from, torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums);
  float* Lanes(torch::Tensor& t, int64_t block) { return t.data_ptr<float>() + block * t.stride(0); }
  void DrawMasks(int64_t len, int64_t batch);
  // A launcher's lane state: where the windows left it, moved to one side or the other.
  void OwnOnHost();
  void OwnOnDevice();
  void LaunchWindow(const torch::Tensor& all, int64_t len, int64_t batch, int64_t steps, const std::vector<bool>& running,
                    bool train, bool masked);
  void FillHyper(const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm);  // hyper_ from the specs
  void LoadParams();  // the model's parameters into params_t_'s lanes
  torch::Tensor Host(const torch::Tensor& t) const;  // t on the CPU (a copy from a launcher's device)

  LaneNet net_;
  LaneIsa isa_;
  int64_t members_ = 0, blocks_ = 0, params_ = 0, hidden_ = 0;
  std::vector<torch::Tensor> weights_, biases_;  // the model's [K, O, I] and [K, 1, O]
  std::function<torch::Tensor(int64_t batch, int64_t units, size_t layer)> dropout_;
  bool dropout_any_ = false;
  torch::Tensor params_t_, m_, v_;  // [blocks, P, 16]
  torch::Tensor hyper_;             // [blocks, kLaneHyperRows + 2F, 16]
  torch::Tensor sums_, val_sums_;   // [blocks, 3, 16] double: this epoch's, its validation's
  torch::Tensor offsets_t_;         // window: [blocks, len, 16] int64 (row starts in the table)
  torch::Tensor corrections_;       // window: [blocks, steps, 2, 16] (LaneWindow::corrections)
  torch::Tensor masks_;             // window, with dropout: [blocks, len, hidden, 16] (on the lanes' device)
  std::vector<double> beta1_pow_, beta2_pow_;  // per member: beta^(its steps so far)
  std::vector<int64_t> offsets_;    // per member: steps before this pack
  int64_t steps_ = 0;
  LaneLauncher* launcher_ = nullptr;  // null: the CPU's lanes
  DeviceRuntime* rt_ = nullptr;
  bool on_device_ = false;            // the launcher's lane state is newer than the host tensors
  torch::Tensor d_params_, d_m_, d_v_, d_hyper_, d_sums_, d_val_sums_, d_scratch_;  // on rt_'s device
  torch::Tensor lane_members_;  // on rt_'s device: [blocks * 16] each lane's member (MemberOf)
};

}  // namespace ens
