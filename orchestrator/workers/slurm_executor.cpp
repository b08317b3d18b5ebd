#include "orchestrator/workers/slurm_executor.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <spdlog/spdlog.h>
#include <thread>

#include "common/base/atomic_file.h"
#include "common/ipc/supervisor_link.h"
#include "common/state/run_layout.h"
#include "orchestrator/workers/executor_factory.h"
#include "orchestrator/workers/transport.h"

namespace ens {

using Clock = std::chrono::steady_clock;

namespace {

std::string Quote(const std::string& s) {  // one sh word, nothing expanded
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string Tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return Trim(all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all);
}

const std::set<std::string>& FinalStates() {
  static const std::set<std::string> k = {"COMPLETED", "FAILED",   "CANCELLED", "TIMEOUT",  "NODE_FAIL",
                                          "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"};
  return k;
}

}  // namespace

SlurmExecutor::SlurmExecutor(SlurmSpec spec, int threads_per_worker, std::string state_dir)
    : spec_(std::move(spec)), threads_(threads_per_worker), state_dir_(std::move(state_dir)) {}

StatusOr<std::string> SlurmExecutor::RunSlurm(const std::vector<std::string>& argv) const {
  SubprocessSpec s;
  s.argv = argv;
  s.stderr_to_stdout = true;
  s.unset_env = {"SLURM_JOB_ID", "SLURM_JOBID"};  // inside an allocation: act on the cluster, not the step
  auto r = RunToEnd(s, "", kSlurmCommandTimeoutS, {}, size_t{4} << 20);
  if (!r.ok()) return r.status();
  if (!r->exit.ok())
    return Status::InvalidArgument(argv[0] + " " + r->exit.Describe() + ": " + Trim(r->out));
  return r->out;
}

std::string SlurmExecutor::JobScript(const WorkerLaunch& launch) {
  std::string s = "#!/bin/sh\n# ensembled worker (slot " + std::to_string(launch.slot) + "): written by the supervisor\n";
  for (const auto& k : launch.unset_env) s += "unset " + Quote(k) + "\n";
  for (const auto& [k, v] : launch.set_env) {
    if (k == "CUDA_VISIBLE_DEVICES") continue;  // Slurm's, from the allocation
    s += "export " + k + "=" + Quote(v) + "\n";
  }
  s += "exec";
  for (const auto& a : launch.argv) s += " " + Quote(a);
  return s + "\n";
}

std::string SlurmExecutor::LogPath(int slot, const std::string& job) const {
  return RunLayout(state_dir_).SlurmLog(slot, job);
}

std::vector<std::string> SlurmExecutor::SbatchArgv(int slot, const std::string& script) const {
  std::vector<std::string> a = {"sbatch", "--parsable", "--job-name=" + job_name_, "--ntasks=1",
                                "--cpus-per-task=" + std::to_string(spec_.cpus_per_worker > 0 ? spec_.cpus_per_worker : threads_),
                                "--chdir=" + state_dir_,
                                "--output=" + LogPath(slot, "%j"),
                                "--export=ALL"};
  if (!spec_.partition.empty()) a.push_back("--partition=" + spec_.partition);
  if (spec_.gpus_per_worker > 0) a.push_back("--gres=gpu:" + std::to_string(spec_.gpus_per_worker));
  if (spec_.mem_per_worker_mb > 0) a.push_back("--mem=" + std::to_string(spec_.mem_per_worker_mb));
  if (!spec_.time_limit.empty()) a.push_back("--time=" + spec_.time_limit);
  a.insert(a.end(), spec_.sbatch_args.begin(), spec_.sbatch_args.end());
  a.push_back(script);
  return a;
}

std::vector<std::string> SlurmExecutor::JobsNamed() const {
  std::vector<std::string> ids;
  auto out = RunSlurm({"squeue", "--me", "--noheader", "--name=" + job_name_, "--format=%i"});
  if (!out.ok()) return ids;
  std::istringstream in(*out);
  for (std::string id; in >> id;) ids.push_back(id);
  return ids;
}

Status SlurmExecutor::Prepare(const std::string& run_id) {
  job_name_ = "ens-" + run_id;
  for (const char* tool : {"sbatch", "squeue", "scancel", "scontrol"}) {
    SubprocessSpec probe;
    probe.argv = {tool, "--version"};
    auto r = RunToEnd(probe, "", kSlurmCommandTimeoutS);
    if (!r.ok())
      return Status::NotFound(std::string("executor \"slurm\": ") + tool + " is not usable here (" +
                              r.status().message() + "); run ensembled on a node with the Slurm client commands");
  }
  if (!spec_.partition.empty()) {
    auto out = RunSlurm({"sinfo", "--noheader", "--partition=" + spec_.partition, "--format=%P"});
    if (!out.ok()) return Status::IOError("sinfo: " + out.status().message());
    if (Trim(*out).empty())
      return Status::InvalidArgument("/resources/slurm/partition: Slurm has no partition '" + spec_.partition + "'");
  }
  const std::string slurm_dir = RunLayout(state_dir_).SlurmDir();
  if (::mkdir(slurm_dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno("mkdir " + slurm_dir, errno);
  // Jobs an earlier supervisor of this run left (it was killed): they would hold resources and
  // can never rejoin (their spawn tokens are unknown to this supervisor).
  std::vector<std::string> left = JobsNamed();
  if (!left.empty()) {
    spdlog::warn("cancelling {} job(s) named {} left by an earlier supervisor of this run", left.size(), job_name_);
    std::vector<std::string> argv = {"scancel"};
    argv.insert(argv.end(), left.begin(), left.end());
    auto r = RunSlurm(argv);
    if (!r.ok()) spdlog::warn("{}", r.status().message());
    for (int i = 0; i < 600; ++i) {  // up to a minute for them to leave the queue
      std::vector<std::string> still;
      auto out = RunSlurm({"squeue", "--me", "--noheader", "--name=" + job_name_, "--format=%i %T"});
      if (out.ok()) {
        std::istringstream in(*out);
        for (std::string id, state; in >> id >> state;)
          if (!FinalStates().count(state)) still.push_back(id);
      }
      if (out.ok() && still.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return Status::Ok();
}

StatusOr<WorkerHandle> SlurmExecutor::Start(const WorkerLaunch& launch) {
  if (job_name_.empty()) return Status::Internal("SlurmExecutor::Start before Prepare");
  const std::string script = RunLayout(state_dir_).SlurmScript(TokenHex(launch.token));
  if (Status s = WriteFileAtomic(script, JobScript(launch)); !s.ok()) return s;
  ::chmod(script.c_str(), 0700);
  auto out = RunSlurm(SbatchArgv(launch.slot, script));
  if (!out.ok()) {
    // sbatch's own refusal (bad partition, a request no node can meet) will not change on retry.
    if (out.status().code() == Status::Code::kInvalidArgument)
      return Status::InvalidArgument("sbatch refused the worker job: " + out.status().message());
    return out.status();
  }
  std::string id = Trim(*out);
  id = id.substr(0, id.find(';'));  // "57;cluster" on federated setups
  if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos)
    return Status::IOError("sbatch printed no job id: '" + Trim(*out) + "'");
  Job job{id, LogPath(launch.slot, id)};
  jobs_[launch.token] = job;
  spdlog::info("slot {}: submitted Slurm job {}", launch.slot, id);
  WorkerHandle h;
  h.token = launch.token;
  h.where = "Slurm job " + id;
  return h;
}

void SlurmExecutor::Signal(const WorkerHandle& worker, int sig) {
  auto it = jobs_.find(worker.token);
  if (it == jobs_.end()) return;
  auto r = sig == SIGTERM ? RunSlurm({"scancel", "--batch", "--signal=TERM", it->second.id})
                          : RunSlurm({"scancel", it->second.id});
  if (!r.ok()) spdlog::warn("scancel of job {}: {}", it->second.id, r.status().message());
}

std::string SlurmExecutor::Ended(const Job& job, const std::string& state, ExitInfo* exit) const {
  // The pool names the worker by its handle ("worker Slurm job 57"): `how` is only what happened.
  std::string how = state.empty() ? "left the queue" : state;
  if (state == "COMPLETED") {
    *exit = {};
  } else if (state == "FAILED" || state == "OUT_OF_MEMORY") {
    *exit = ExitInfo{false, 1, 0};
    auto info = RunSlurm({"scontrol", "show", "job", job.id});
    if (info.ok()) {  // ExitCode=<code>:<signal>
      size_t at = info->find(" ExitCode=");
      if (at != std::string::npos) {
        int code = 0, sig = 0;
        if (std::sscanf(info->c_str() + at, " ExitCode=%d:%d", &code, &sig) == 2)
          *exit = sig ? ExitInfo{true, 0, sig} : ExitInfo{false, code, 0};
      }
    }
    how += " (" + exit->Describe() + ")";
  } else {  // cancelled, timed out, preempted, node lost, or gone without a trace
    *exit = ExitInfo{true, 0, SIGTERM};
  }
  std::string tail = Tail(job.log, 400);
  if (!tail.empty() && !exit->ok()) how += "; the end of " + job.log + ": " + tail;
  else if (tail.empty() && !exit->ok())
    how += "; no output in " + job.log + " (does the node see the state directory?)";
  return how;
}

std::vector<WorkerExit> SlurmExecutor::PollExits() {
  std::vector<WorkerExit> out;
  if (jobs_.empty() || Clock::now() < next_poll_) return out;
  next_poll_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kSlurmPollIntervalS));
  std::string ids;
  for (const auto& [token, job] : jobs_) ids += (ids.empty() ? "" : ",") + job.id;
  auto listed = RunSlurm({"squeue", "--me", "--noheader", "--states=all", "--jobs=" + ids, "--format=%i %T"});
  std::map<std::string, std::string> state;
  if (!listed.ok()) {
    // squeue --jobs fails when none of the ids is known any more; any other failure (slurmctld
    // unreachable) leaves every job as it was.
    if (listed.status().message().find("Invalid job id") == std::string::npos) {
      spdlog::warn("squeue: {}", listed.status().message());
      return out;
    }
  } else {
    std::istringstream in(*listed);
    for (std::string id, st; in >> id >> st;) state[id] = st;
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto s = state.find(it->second.id);
    if (s != state.end() && !FinalStates().count(s->second)) {
      ++it;
      continue;
    }
    WorkerExit e;
    e.token = it->first;
    e.how = Ended(it->second, s == state.end() ? "" : s->second, &e.exit);
    out.push_back(std::move(e));
    it = jobs_.erase(it);
  }
  return out;
}

void SlurmExecutor::Release() {
  if (job_name_.empty()) return;
  std::vector<std::string> argv = {"scancel", "--name=" + job_name_, "--me"};
  for (const auto& [token, job] : jobs_) argv.push_back(job.id);
  auto r = RunSlurm(argv);
  if (!r.ok()) spdlog::warn("cancelling the run's Slurm jobs: {}", r.status().message());
  jobs_.clear();
}

StatusOr<ExecutorSetup> SetUpSlurmExecutor(const ExecutorContext& ctx) {
  const SlurmSpec& sl = ctx.config->resources.slurm;
  ExecutorSetup setup;
  for (int i = 0; i < sl.workers; ++i) setup.placements.push_back({i, ""});  // Slurm picks the GPUs
  if (ctx.slots_only) return setup;
  std::string host = sl.advertise_host;
  if (host.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  auto tcp = TcpTransport::Listen(sl.listen, sl.port, host, RunLayout(ctx.state_root).TransportSecret());
  if (!tcp.ok()) return tcp.status();
  spdlog::info("workers connect to {} (Slurm jobs named ens-{})", (*tcp)->address(), ctx.run_id);
  setup.transport = std::move(*tcp);
  setup.executor = std::make_unique<SlurmExecutor>(sl, ctx.config->resources.threads_per_worker, ctx.state_root);
  return setup;
}

}  // namespace ens
