// Trainer: trains one member with libtorch and produces everything its directory holds.
//
// The only place (with predictor.cpp) that includes libtorch. Inputs point into the
// read-only dataset mapping; nothing here writes to them. Each call re-seeds every
// generator it uses from the task seed: weight init uses its own CPU generator, dropout the
// re-seeded default generator, shuffling the project's SeededRng, so the result depends on
// (member spec, seed, data) only — not on what this process trained before.
// Not thread-safe: one task at a time per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/status.h"

namespace ens {

struct TrainInputs {
  const TaskSpec* task = nullptr;
  const float* rows = nullptr;          // train segment rows, stride features+1, target last
  int features = 0;
  std::vector<int64_t> train_idx;       // rows of this member's training split (may repeat: bootstrap)
  std::vector<int64_t> val_idx;         // rows of its validation split
  const float* holdout = nullptr;
  uint64_t holdout_rows = 0;
  const float* pool = nullptr;
  uint64_t pool_rows = 0;
  std::string checkpoint_path;          // where to save the torch archive; "" = no checkpoint
  std::function<void(int epoch)> on_progress;  // called after every batch (heartbeats; cheap)
};

struct TrainOutputs {
  std::vector<nlohmann::json> history;  // one object per epoch
  nlohmann::json metrics;               // training metrics (member_result.h keys it owns)
  nlohmann::json norm;                  // {"x_mean":[..],"x_std":[..],"y_mean":v,"y_std":v}
  std::vector<float> holdout_pred;
  std::vector<float> pool_pred;
  bool permanent_failure = false;       // set with a non-ok status: retrying cannot help
  // TrainPack only: this member's own failure (a non-finite loss, permanent_failure set; or
  // its checkpoint write). The other members' results stand; this one's other fields are
  // then incomplete.
  Status status;
};

// Process-wide, once at worker start: deterministic algorithms, cuDNN settings, 1 inter-op
// thread. REQUIRES: CUBLAS_WORKSPACE_CONFIG already in the environment (the supervisor sets it).
void ConfigureTorchForDeterminism();
std::string TorchDeviceDescription();

Status TrainMember(const TrainInputs& in, TrainOutputs* out);

// Trains K pack-compatible members (PackKey equal) as one batched model; out[k] is member
// k's result in the same format as TrainMember's. REQUIRES: same rows, features, split sizes.
// A packed member's bits depend on the whole pack (its composition is fixed by the config).
// A member whose loss turns non-finite is dropped (out[k].status) while the others go on;
// the returned status is for failures of the pack as a whole (deterministic: bad inputs).
Status TrainPack(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out);

// Frees what the allocator caches (CUDA caching allocator) after a task.
void ReleaseTorchCaches();
// CUDA caching allocator: bytes reserved now, in KiB (0 without CUDA).
int64_t CudaReservedKb();

}  // namespace ens
