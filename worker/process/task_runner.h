// TaskRunner: runs one member task end to end inside a worker process.
//
// Maps the dataset segments the task names (kept mapped across tasks, re-mapped when the
// task needs a newer generation), splits the rows with the member's split seed, trains,
// (or runs a command member's program, command_member.h), and writes each member directory to <out_dir>.tmp as soon as the member's outputs are
// made. Once the pack is done, one filesystem flush (syncfs) makes every file of it durable,
// each directory is renamed into place and each parent directory fsynced once: a member
// directory that exists is complete, at two flushes per pack whatever its size. A pack of K > 1
// whose tasks say pack_results writes one pack directory instead (common/state/pack_results.h: a
// few files for all its members, one syncfs, one rename). A task with
// publish false (a journaled member in a re-run pack) trains but writes nothing. Every phase
// (setup, training, evaluating, predicting, writing) reports progress at least once per
// member or batch, so heartbeats never stop while the pack moves. After the task, every
// tensor of it is gone and freed heap is returned to the OS (malloc_trim). The device runtime
// (device_runtime.h) is initialised before the first task asks it anything; the GPU's cached
// blocks are kept across tasks (the next task reuses them) and returned to the driver only when
// a task leaves the worker's reservation above its limit (CachePolicy). Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/state/dataset_segment.h"
#include "common/state/pack_results.h"
#include "common/ipc/protocol.h"
#include "common/base/status.h"
#include "worker/device/device_runtime.h"
#include "worker/train/trainer.h"

namespace ens {

struct TaskOutcome {
  Status status;
  bool permanent = false;   // with !status.ok(): retrying cannot help
  bool device_lost = false; // with !status.ok(): the CUDA context is unusable; the worker must end
  nlohmann::json metrics;   // with status.ok(): the metrics.json content
};

// When the worker hands the GPU's cached blocks back to the driver (a device-wide sync and
// fresh allocations for the next task): after a task that leaves the reservation at or above
// empty_above_bytes. Default: 0, never (the cache is reused by the next task).
struct CachePolicy {
  int64_t empty_above_bytes = 0;
};

class TaskRunner {
 public:
  // REQUIRES: runtime outlives the runner.
  explicit TaskRunner(DeviceRuntime* runtime, CachePolicy cache = {}) : runtime_(runtime), cache_(cache) {}
  // REQUIRES: task validated (DecodeMessage / TaskFromJson).
  using Progress = std::function<void(TaskPhase phase, int epoch)>;
  TaskOutcome Run(const TaskSpec& task, const Progress& on_progress);
  // The tasks as one fused pack (TrainPack; a single task is a pack of one); one outcome per
  // task, in order. on_note receives log notes (a pack split after running out of memory).
  // REQUIRES: the tasks share PackKey, generation, rows and data_dir.
  std::vector<TaskOutcome> RunPack(const std::vector<TaskSpec>& tasks,
                                   const Progress& on_progress,
                                   const std::function<void(const std::string&)>& on_note = nullptr);

 private:
  Status EnsureMapped(const TaskSpec& task);
  Status Prepare(const TaskSpec& task, TrainInputs* in, bool* permanent);
  // RunPack's set-up: every task's inputs, or false with every outcome failed.
  bool PrepareInputs(const std::vector<TaskSpec>& tasks, const Progress& on_progress,
                     const std::function<void(const std::string&)>& on_note, int64_t rss_before,
                     std::vector<TrainInputs>* ins, std::vector<TaskOutcome>* outs);
  Status WriteOutputs(const TrainInputs& in, TrainOutputs& res, int64_t rss_before, const nlohmann::json& pack_ref);
  // A command member (worker/models/command_member.h) in place of TrainPack.
  TrainOutputs RunCommand(const TaskSpec& task, const TrainInputs& in, const Progress& on_progress);
  void Publish(const std::vector<TaskSpec>& tasks, std::vector<TaskOutcome>* outs, const Progress& on_progress);
  // After a task: the cached GPU blocks go back to the driver when CachePolicy says so.
  void KeepCacheWithinPolicy(const std::function<void(const std::string&)>& on_note);
  DeviceRuntime* runtime_;
  CachePolicy cache_;
  std::string data_dir_;
  DeviceDataCachePtr device_data_ = NewDeviceDataCache();  // the generation on the GPU, across tasks
  std::unique_ptr<DatasetView> train_, holdout_, pool_;
  // The running pack's results (task pack_results, K > 1), else null: its members then have
  // no directories of their own.
  std::unique_ptr<PackResultsWriter> pack_writer_;
};

// Current and peak resident set of this process, in KiB (from /proc/self/status).
int64_t CurrentRssKb();
int64_t PeakRssKb();

}  // namespace ens
