// SlurmExecutor: workers as Slurm pilot jobs, one job per worker, each running
// `ensemble-worker serve --connect ...` for many tasks, as a local worker does.
//
// - Start: writes the job's script (state_dir/slurm/worker-<token>.sh: the worker's
//   environment and argv, no shell expansion of any value) and submits it with sbatch
//   --parsable --job-name=ens-<run id> (plus partition, --gres=gpu:N unless CPU-only,
//   --cpus-per-task, --mem, --time and the config's extra arguments, each one argument).
//   Slurm sets CUDA_VISIBLE_DEVICES from the allocation: the slot's own value is not passed.
//   An sbatch that refuses the job (bad partition, impossible request) is InvalidArgument:
//   the run stops with exit 78 and sbatch's words.
// - PollExits: at most once per kPollIntervalS, one `squeue --me --states=all` for every job
//   in flight (accounting, sacct, may be disabled). A job in a final state (COMPLETED, FAILED,
//   CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE) or no longer
//   known is over; a FAILED job's exit code comes from `scontrol show job`. When squeue itself
//   fails (slurmctld unreachable) nothing is reported and it is tried again.
// - Signal: SIGTERM goes to the job's batch step (scancel --batch --signal=TERM); any other
//   signal cancels the job (scancel).
// - Prepare: sbatch/squeue/scancel must be found; the partition, when named, must exist
//   (sinfo); jobs named ens-<run id> that an earlier supervisor of this run left are
//   cancelled, and waited for, before any new one starts.
// - Release: cancels every job of the run (by name, so one submitted a moment ago too).
// Every Slurm command runs through common/subprocess (no shell) with a timeout.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "orchestrator/workers/executor.h"

namespace ens {

inline constexpr double kSlurmPollIntervalS = 1.0;
inline constexpr double kSlurmCommandTimeoutS = 60;

class SlurmExecutor : public Executor {
 public:
  // state_dir: absolute, on a filesystem every node sees.
  SlurmExecutor(SlurmSpec spec, int threads_per_worker, std::string state_dir);
  Status Prepare(const std::string& run_id) override;
  StatusOr<WorkerHandle> Start(const WorkerLaunch& launch) override;
  void Signal(const WorkerHandle& worker, int sig) override;
  std::vector<WorkerExit> PollExits() override;
  void Release() override;
  bool remote() const override { return true; }
  std::string name() const override { return "slurm"; }

  // The sbatch command line for one worker's script (exposed for tests).
  std::vector<std::string> SbatchArgv(int slot, const std::string& script) const;
  // The job script: exports, unsets, then exec of argv; every value single-quoted.
  static std::string JobScript(const WorkerLaunch& launch);

 private:
  struct Job {
    std::string id;
    std::string log;  // its output file
  };
  // The job's output file; `job` is an id, or sbatch's "%j" pattern.
  std::string LogPath(int slot, const std::string& job) const;
  StatusOr<std::string> RunSlurm(const std::vector<std::string>& argv) const;
  std::vector<std::string> JobsNamed() const;  // ids of this run's jobs still known to Slurm
  std::string Ended(const Job& job, const std::string& state, ExitInfo* exit) const;

  SlurmSpec spec_;
  int threads_ = 1;
  std::string state_dir_;
  std::string job_name_;
  std::map<uint64_t, Job> jobs_;  // by spawn token
  std::chrono::steady_clock::time_point next_poll_{};
};

}  // namespace ens
