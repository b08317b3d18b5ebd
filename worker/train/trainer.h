// Trainer: the one training loop. Trains a pack of K >= 1 members and produces everything
// their member directories hold; unpacked training is a pack of one.
//
// A member whose task names warm_from starts from that train state (its weights and optimizer
// moments, its Adam step count carried on) with warm_start_epochs as its budget; one whose
// architecture or optimizer no longer fits the state starts cold and says so in its metrics
// ("warm_start"). A warm_start member leaves its own train state (TrainOutputs::train_state).
// A member with early_stopping.refit trains twice: once on its split until early stopping
// picks its best epoch count, then from its first weights again on all its rows (no
// validation) for that count; it keeps the second. Both are its own work: the same bits in
// any pack.
// Each member carries its own state through the loop: split (the caller's), shuffle stream,
// dropout stream, init, standardisation, hyperparameters (lr, weight_decay, momentum, l1,
// l2, huber_delta, dropout rate as per-member tensors), epochs, early stopping and the step
// at which it stopped. On the CPU a member's checkpoint tensors, history (except timings)
// and predictions are bitwise the same whatever pack it is trained in (model.h says how).
//
// The hot loop never reads the device: metrics accumulate on it and are read once per
// epoch; an epoch's shuffled order goes to the device in windows of whole batches (the whole
// epoch when the pack's indices fit in kIndexWindowBytes, so host index memory is bounded
// whatever the table; member_rows.h says what a member holds per row); a DeviceDataCache
// keeps a dataset generation on the GPU across tasks (then copies only appended rows).
// A libtorch error (c10::Error) becomes the failure of the members it hit, never an abort, sorted
// by kind (device_runtime.h): out of memory splits a pack in halves and trains them one after
// the other, and a lone member out of memory fails transiently (the supervisor retries it within
// its attempts); a CUDA error that leaves the context unusable fails every member with
// device_lost set (the worker must end); any other error is the task's own (permanent).
// Everything the loop asks of the GPU runtime beyond tensor ops goes through the inputs'
// DeviceRuntime (device_runtime.h): the allocator's peak statistics, and every copy between
// host and device made while training (per epoch or per window of batches, never per step).
// Inputs point into the read-only dataset mapping; nothing here writes to them.
// Not thread-safe: one pack at a time per process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/data/member_rows.h"
#include "common/ipc/protocol.h"
#include "common/base/status.h"

namespace ens {

class DeviceDataCache;
class DeviceRuntime;
class LaneLauncher;
struct DeviceDataCacheDeleter {
  void operator()(DeviceDataCache* c) const;
};
using DeviceDataCachePtr = std::unique_ptr<DeviceDataCache, DeviceDataCacheDeleter>;
DeviceDataCachePtr NewDeviceDataCache();

struct TrainOutputs;

// Host memory for one window of a pack's row indices (int64 per member and position).
constexpr int64_t kIndexWindowBytes = int64_t{1} << 20;
// The same for a pack that PackStep trains (pack_step.h): a window's gather and sums are
// about 20 kernels, so its windows are longer (16 steps at K = 4096, batch 32); on the
// device it holds the window's rows and errors (~250 MB at K = 4096, 9 features, 6 units).
constexpr int64_t kPackStepWindowBytes = int64_t{16} << 20;

// Which code a pack trains with. kByDevice: the device's own (on the CPU its kernels, on CUDA
// tensor ops: PackStep where it fits, else the autograd loop). kTensorOps and kAutogradOps run
// the CUDA path's tensor ops wherever the pack is, so that tests and bench/step_kernels.cpp
// check and count the CUDA path on a machine without a GPU: kTensorOps as CUDA runs it,
// kAutogradOps the autograd loop even where PackStep fits (the loop CUDA ran before it).
enum class TrainPath { kByDevice, kTensorOps, kAutogradOps };

struct TrainInputs {
  const TaskSpec* task = nullptr;
  const float* rows = nullptr;          // train segment rows, stride features+targets, targets last
  int features = 0;
  int targets = 1;                      // regression targets per row (a classifier: 1, the label)
  MemberRows split;                     // its training (may repeat: bootstrap) and validation rows
  const float* holdout = nullptr;
  uint64_t holdout_rows = 0;
  const float* pool = nullptr;
  uint64_t pool_rows = 0;
  // Where to save the member's checkpoint: its weights file (common/state/member_weights.h) when its
  // forward runs eagerly (an MLP), else its module (checkpoint.h); "" = no checkpoint.
  std::string checkpoint_path;
  // With checkpoint_path "": the checkpoint's bytes in TrainOutputs::checkpoint instead of a
  // file (a pack's results, common/state/pack_results.h, take them).
  bool checkpoint_in_memory = false;
  DeviceDataCache* data_cache = nullptr;  // optional; the pack uses its first member's
  // Where the pack trains (its first member's): REQUIRES Init() returned OK. nullptr: the CPU.
  DeviceRuntime* runtime = nullptr;
  TrainPath path = TrainPath::kByDevice;  // the pack's first member's
  // Count the ATen operators the training epochs dispatch (dispatch_count.h; not validation):
  // metrics "train_ops_per_step". Costs a callback an operator: benches and gpu-check only
  // (a worker whose environment has ENSEMBLED_COUNT_OPS sets it for every task, and one with
  // ENSEMBLED_TRAIN_PATH=autograd trains every task on TrainPath::kAutogradOps).
  bool count_ops = false;
  // How lane packs train on the runtime's device (lane_launcher.h: on a GPU the CUDA lane
  // kernel, in tests the host launcher with a fake device): a pack LaneStepFits then trains in
  // lanes on the device, one launch a window, with the CPU's bits. nullptr: lanes on the CPU
  // only (on a GPU such a pack keeps PackStep).
  LaneLauncher* lanes = nullptr;
  // Heartbeats: after every batch, validation chunk and member's predictions (cheap).
  std::function<void(TaskPhase phase, int epoch)> on_progress;
  std::function<void(const std::string&)> on_note;    // notes for the log (a split pack)
  // Called with this member's outputs as soon as they are complete (status ok), before the
  // next member's are made, so a pack of thousands never holds every member's predictions at
  // once: it may write them out and clear the large fields; a non-ok status it sets is the
  // member's outcome. After an out-of-memory split it may be called again for the same member.
  std::function<void(TrainOutputs&)> on_outputs;
};

struct TrainOutputs {
  Status status;                        // this member's outcome
  bool permanent_failure = false;       // with !status.ok(): retrying cannot help
  bool device_lost = false;             // with !status.ok(): the CUDA context is unusable
  std::vector<nlohmann::json> history;  // one object per epoch
  nlohmann::json metrics;               // training metrics (member_result.h keys it owns)
  nlohmann::json norm;                  // {"x_mean":[..],"x_std":[..],"y_mean":v,"y_std":v} (several targets: [..])
  std::vector<float> holdout_pred;
  std::vector<float> pool_pred;
  std::string train_state;              // warm_start members: train_state.pt's bytes (checkpoint.h)
  // With checkpoint_in_memory: the checkpoint's bytes, and the member file they are
  // (weights.bin, or checkpoint.pt for a member saved as its module).
  std::string checkpoint, checkpoint_file;
};

// Process-wide, once at worker start: deterministic algorithms, cuDNN settings, 1 inter-op
// thread; uninitialised memory is not filled (every tensor the worker makes with empty() is
// written whole before it is read). REQUIRES: CUBLAS_WORKSPACE_CONFIG already in the
// environment (common/base/cublas_workspace.h: the supervisor sets it, and the worker's main when unset).
void ConfigureTorchForDeterminism();

// Trains in[0..K) together; (*out)[k] is member k's result (its on_outputs already called). A member whose loss turns
// non-finite fails alone (permanent) while the others go on.
// REQUIRES: K >= 1; equal PackKey, rows, features, targets and split sizes.
void TrainPack(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out);

}  // namespace ens
