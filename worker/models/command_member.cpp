#include "worker/models/command_member.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/base/atomic_file.h"
#include "common/data/data_source.h"
#include "common/base/exit_codes.h"
#include "common/data/npy_writer.h"
#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "common/base/subprocess.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTickMs = 200;
constexpr uint64_t kGatherRows = 4096;

std::string InputDir(const CommandMemberJob& job) { return job.dir + "/input"; }
std::string OutputDir(const CommandMemberJob& job) { return MemberFiles(job.dir).CommandModel(); }

// The member's rows at split positions [0, n), features to <stem>_x.npy and targets to <stem>_y.npy.
Status WriteRows(const CommandMemberJob& job, const std::string& stem, uint64_t n,
                 void (MemberRows::*rows_at)(uint64_t, uint64_t, int64_t*) const) {
  const uint64_t f = job.train->header().features, stride = job.train->stride();
  auto x = NpyWriter::Create(InputDir(job) + "/" + stem + "_x.npy", {n, f});
  if (!x.ok()) return x.status();
  auto y = NpyWriter::Create(InputDir(job) + "/" + stem + "_y.npy", {n});
  if (!y.ok()) return y.status();
  std::vector<int64_t> ids(kGatherRows);
  for (uint64_t pos = 0; pos < n; pos += kGatherRows) {
    const uint64_t len = std::min(kGatherRows, n - pos);
    (job.split->*rows_at)(pos, len, ids.data());
    for (uint64_t i = 0; i < len; ++i) {
      const float* row = job.train->data() + static_cast<uint64_t>(ids[i]) * stride;
      Status s = x->AppendRow(row);
      if (s.ok()) s = y->AppendRow(row + f);
      if (!s.ok()) return s;
    }
    if (job.on_wait) job.on_wait();
  }
  Status s = x->Finish();
  return s.ok() ? y->Finish() : s;
}

// Kills and reaps every process the program left behind that was reparented to this worker
// (a child subreaper). Returns how many there were.
int KillStrays() {
  int killed = 0;
  for (int pass = 0; pass < 100; ++pass) {
    std::vector<pid_t> strays = ProcessChildren(::getpid());
    if (strays.empty()) return killed;
    for (pid_t p : strays) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
      ++killed;
    }
  }
  return killed;
}

// The program's output: to command.log up to kCommandLogBytes, and line by line, tagged, to
// the worker's log up to kCommandLogLines lines.
class OutputSink {
 public:
  OutputSink(const CommandMemberJob& job) : job_(job), tag_("[" + job.task->member.name + "] ") {
    log_ = std::fopen(MemberFiles(job.dir).CommandLog().c_str(), "we");
  }
  ~OutputSink() {
    if (log_) std::fclose(log_);
  }
  void Add(const char* data, size_t n) {
    const uint64_t room = kCommandLogBytes > logged_ ? kCommandLogBytes - logged_ : 0;
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(room, n));
    if (log_ && keep > 0) std::fwrite(data, 1, keep, log_);
    logged_ += keep;
    dropped_ += n - keep;
    for (size_t i = 0; i < n && lines_ <= kCommandLogLines; ++i) {
      if (data[i] != '\n') {
        if (line_.size() < 4096) line_ += data[i];
        continue;
      }
      Line();
    }
  }
  void Finish() {
    if (!line_.empty()) Line();
    if (log_ && dropped_ > 0)
      std::fprintf(log_, "\n[ensembled: %llu further bytes of output dropped beyond %llu]\n",
                   static_cast<unsigned long long>(dropped_), static_cast<unsigned long long>(kCommandLogBytes));
    if (log_) std::fflush(log_);
  }

 private:
  void Line() {
    if (lines_ < kCommandLogLines) Log(tag_ + line_);
    else if (lines_ == kCommandLogLines) Log(tag_ + "(further output only in " + MemberFiles(job_.dir).CommandLog() + ")");
    ++lines_;
    line_.clear();
  }
  void Log(const std::string& line) {
    if (job_.on_log) job_.on_log(line);
    else spdlog::info("{}", line);
  }
  const CommandMemberJob& job_;
  std::string tag_, line_;
  std::FILE* log_ = nullptr;
  uint64_t logged_ = 0, dropped_ = 0;
  int lines_ = 0;
};

// The last lines of command.log (at most ~800 bytes), for a failure message.
std::string LogTail(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok() || text->empty()) return "";
  std::string t = text->size() > 800 ? text->substr(text->size() - 800) : *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t.empty() ? "" : "; its output ends: " + t;
}

enum class RunEnd { kExited, kTimedOut };

// Runs the program to its end (or the timeout); on return nothing it started is alive.
StatusOr<ExitInfo> RunProgram(const CommandMemberJob& job, RunEnd* how) {
  const ModelSpec& model = job.task->member.model;
  SubprocessSpec spec;
  spec.argv = model.argv;
  spec.set_env = CommandMemberEnvironment(job);
  spec.own_process_group = true;
  spec.die_with_parent = true;
  spec.stdin_mode = SubprocessSpec::Stdio::kNull;
  spec.stdout_mode = SubprocessSpec::Stdio::kPipe;
  spec.stderr_to_stdout = true;
  // Whatever the program leaves behind is reparented here, not to init, so it can be reaped.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  auto started = Subprocess::Start(spec);
  if (!started.ok()) return started.status();
  Subprocess& child = *started;
  ::fcntl(child.stdout_fd(), F_SETFL, O_NONBLOCK);
  OutputSink sink(job);
  const auto deadline = Clock::now() + std::chrono::duration<double>(model.timeout_s);
  auto tick = Clock::now();
  *how = RunEnd::kExited;
  char buf[65536];
  auto drain = [&] {
    for (;;) {
      const ssize_t n = child.stdout_fd() >= 0 ? ::read(child.stdout_fd(), buf, sizeof buf) : 0;
      if (n > 0) {
        sink.Add(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) child.CloseStdout();
      if (n == 0 || errno != EINTR) return;
    }
  };
  // The leader's exit ends the run, not the end of its output: a child left behind may hold
  // the pipe open for ever. A pidfd wakes the wait the moment it exits (without one, an old
  // kernel, the exit is noticed within 20 ms).
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid(), 0));
  while (!child.HasEnded()) {
    const auto now = Clock::now();
    if (now >= deadline) {
      *how = RunEnd::kTimedOut;
      break;
    }
    if (job.on_wait && now - tick >= std::chrono::milliseconds(kTickMs)) {
      tick = now;
      job.on_wait();
    }
    struct pollfd p[2];
    nfds_t n = 0;
    if (child.stdout_fd() >= 0) p[n++] = {child.stdout_fd(), POLLIN, 0};
    if (pidfd >= 0) p[n++] = {pidfd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int wait_ms = static_cast<int>(std::min<int64_t>(left, pidfd >= 0 ? kTickMs : 20));
    if (::poll(p, n, wait_ms) > 0 && child.stdout_fd() >= 0 && p[0].revents != 0) drain();
  }
  if (pidfd >= 0) ::close(pidfd);
  drain();
  child.Signal(SIGKILL);  // its whole group; the leader is still unreaped, so this is safe
  const ExitInfo exit = child.Wait();
  drain();
  child.CloseStdout();
  KillStrays();
  sink.Finish();
  return exit;
}

StatusOr<std::vector<nlohmann::json>> ReadHistory(const std::string& path) {
  std::vector<nlohmann::json> out;
  auto text = ReadFile(path);
  if (!text.ok()) return text.status().code() == Status::Code::kNotFound ? StatusOr<std::vector<nlohmann::json>>(out)
                                                                        : text.status();
  std::istringstream in(*text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return Status::InvalidArgument(path + ":" + std::to_string(n) + ": not a JSON object");
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CommandMemberEnvironment(const CommandMemberJob& job) {
  const TaskSpec& t = *job.task;
  const std::string in = InputDir(job);
  const std::string threads = std::to_string(t.threads);
  return {
      {"ENSEMBLED_MEMBER", t.member.name},
      {"ENSEMBLED_MEMBER_INDEX", std::to_string(t.member_index)},
      {"ENSEMBLED_ROUND", std::to_string(t.round)},
      {"ENSEMBLED_GENERATION", std::to_string(t.generation)},
      {"ENSEMBLED_ATTEMPT", std::to_string(t.attempt)},
      {"ENSEMBLED_SEED", std::to_string(t.seed)},
      {"ENSEMBLED_SEED_INIT", std::to_string(StreamSeed(t.seed, SeedStream::kInit))},
      {"ENSEMBLED_SEED_SHUFFLE", std::to_string(StreamSeed(t.seed, SeedStream::kShuffle))},
      {"ENSEMBLED_SEED_DROPOUT", std::to_string(StreamSeed(t.seed, SeedStream::kDropout))},
      {"ENSEMBLED_SEED_SPLIT", std::to_string(StreamSeed(t.seed, SeedStream::kSplit))},
      {"ENSEMBLED_THREADS", threads},
      {"ENSEMBLED_FEATURES", std::to_string(job.train->header().features)},
      {"ENSEMBLED_TRAIN_X", in + "/train_x.npy"},
      {"ENSEMBLED_TRAIN_Y", in + "/train_y.npy"},
      {"ENSEMBLED_VAL_X", in + "/val_x.npy"},
      {"ENSEMBLED_VAL_Y", in + "/val_y.npy"},
      {"ENSEMBLED_HOLDOUT_X", RunLayout::HoldoutFeatures(job.data_dir)},
      {"ENSEMBLED_POOL_X", RunLayout::PoolFeatures(job.data_dir)},
      {"ENSEMBLED_OUTPUT_DIR", OutputDir(job)},
      {"ENSEMBLED_MEMBER_DIR", t.out_dir},
      {"OMP_NUM_THREADS", threads},
      {"MKL_NUM_THREADS", threads},
      {"OPENBLAS_NUM_THREADS", threads},
  };
}

CommandMemberResult RunCommandMember(const CommandMemberJob& job) {
  CommandMemberResult r;
  const TaskSpec& t = *job.task;
  const std::string program = t.member.model.argv.empty() ? "" : t.member.model.argv[0];
  auto fail = [&](Status s, bool permanent) {
    r.status = std::move(s);
    r.permanent = permanent;
    return std::move(r);
  };
  if (job.train->targets() != 1)  // the config refuses it (TargetCountProblem); a table changed under us
    return fail(Status::InvalidArgument("member " + t.member.name + ": a command member predicts one target; the table has " +
                                        std::to_string(job.train->targets())), true);
  const auto t0 = Clock::now();
  for (const std::string& f : {RunLayout::HoldoutFeatures(job.data_dir), RunLayout::PoolFeatures(job.data_dir)})
    if (::access(f.c_str(), R_OK) != 0) return fail(Status::FromErrno(f, errno), false);
  Status s = MakeDirs(InputDir(job));
  if (s.ok()) s = MakeDirs(OutputDir(job));
  if (s.ok()) s = WriteRows(job, "train", job.split->train_size(), &MemberRows::Train);
  if (s.ok()) s = WriteRows(job, "val", job.split->val_size(), &MemberRows::Val);
  if (!s.ok()) return fail(s, false);

  RunEnd how = RunEnd::kExited;
  auto exit = RunProgram(job, &how);
  Status removed = RemoveTree(InputDir(job));
  if (!exit.ok()) {  // it never ran: cannot be executed (permanent), or no pipe or process to be had
    const bool missing = exit.status().code() == Status::Code::kNotFound;
    const std::string msg = "member " + t.member.name + ": " + exit.status().message();
    return fail(missing ? Status::NotFound(msg) : Status::IOError(msg), missing);
  }
  const std::string log = MemberFiles(job.dir).CommandLog();
  const std::string who = "member " + t.member.name + ": command " + program;
  if (how == RunEnd::kTimedOut)
    return fail(Status::Timeout(who + " did not finish within " + std::to_string(t.member.model.timeout_s) +
                                " s (timeout_s); killed" + LogTail(log)),
                false);
  if (!exit->ok()) {
    const bool permanent = !exit->signaled && exit->code == exit_code::kPermanentFailure;
    return fail(Status::Internal(who + " " + exit->Describe() + (permanent ? " (permanent: not retried)" : "") +
                                 LogTail(log)),
                permanent);
  }
  if (!removed.ok()) return fail(removed, false);

  // Its outputs: a bad one is the program's doing and would be the same again.
  const std::string out = OutputDir(job);
  auto holdout = LoadNpyColumn(out + "/holdout_pred.npy", job.holdout->header().rows);
  if (!holdout.ok()) return fail(Status::InvalidArgument(who + ": " + holdout.status().message()), true);
  auto pool = LoadNpyColumn(out + "/pool_pred.npy", job.pool_rows);
  if (!pool.ok()) return fail(Status::InvalidArgument(who + ": " + pool.status().message()), true);
  auto history = ReadHistory(MemberFiles(out).History());
  if (!history.ok()) return fail(Status::InvalidArgument(who + ": " + history.status().message()), true);
  nlohmann::json own = nlohmann::json::object();
  auto metrics_text = ReadFile(MemberFiles(out).Metrics());
  if (metrics_text.ok()) {
    own = nlohmann::json::parse(*metrics_text, nullptr, /*allow_exceptions=*/false);
    if (!own.is_object()) return fail(Status::InvalidArgument(who + ": " + out + "/metrics.json: not a JSON object"), true);
  }

  const uint64_t n = job.holdout->header().rows, f = job.holdout->header().features;
  double se = 0, ae = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double e = static_cast<double>((*holdout)[i]) - job.holdout->data()[i * (f + 1) + f];
    se += e * e;
    ae += std::abs(e);
  }
  r.metrics = {{"holdout_rmse", n ? std::sqrt(se / static_cast<double>(n)) : 0.0},
               {"holdout_mae", n ? ae / static_cast<double>(n) : 0.0},
               {"epochs_run", static_cast<int>(history->size())},
               {"device", "command"},
               {"train_seconds", std::chrono::duration<double>(Clock::now() - t0).count()},
               {"command", std::move(own)}};
  r.history = std::move(*history);
  r.holdout_pred = std::move(*holdout);
  r.pool_pred = std::move(*pool);
  return r;
}

}  // namespace ens
