// RecyclePolicy: decides, after each task, whether a worker process should be replaced.
//
// The worker asks after it finished writing a task and before it reports; a "yes" travels
// with the report (done/failed carry "recycle"), the supervisor gives that slot no new task,
// the worker exits 0 and the slot is respawned at once. Pure logic. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config.h"

namespace ens {

struct ProcessMemory {
  int64_t rss_kb = 0;
  int64_t gpu_reserved_kb = 0;  // 0 without CUDA
};

class RecyclePolicy {
 public:
  explicit RecyclePolicy(RecycleSpec spec) : spec_(spec) {}
  // Records a finished task; returns the reason to recycle now, or "" to keep going.
  std::string AfterTask(const ProcessMemory& now);
  int tasks_done() const { return tasks_; }

 private:
  RecycleSpec spec_;
  int tasks_ = 0;
  int64_t first_rss_kb_ = 0;  // RSS after the first task: the process's warm baseline
};

}  // namespace ens
