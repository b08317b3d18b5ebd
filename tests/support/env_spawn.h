// Test support for the resilience tests: starting the real binaries with a changed
// environment, bounded waits, and small process/state helpers.
// Header-only; builds on process_harness.h. Not thread-safe (call from the test's thread).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/member_view.h"
#include "common/state/run_layout.h"
#include "process_harness.h"

extern char** environ;

namespace ens::testing {

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Environment changes for a child: variables to set (or replace) and to remove.
struct EnvChanges {
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
};

// This process's environment with `env` applied, as "KEY=value" strings.
inline std::vector<std::string> EnvironmentWith(const EnvChanges& env) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) vars[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& k : env.unset) vars.erase(k);
  for (const auto& [k, v] : env.set) vars[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

// Like Spawn() in process_harness.h, but the child gets this process's environment with
// `env` applied. argv/envp are built before fork (the child only dup2s and execs).
inline pid_t SpawnEnv(const std::vector<std::string>& argv, const std::string& out_file,
                      const std::string& err_file, const EnvChanges& env = {}) {
  std::vector<std::string> env_strings = EnvironmentWith(env), argv_copy = argv;
  std::vector<char*> envp = NullTerminated(env_strings), args = NullTerminated(argv_copy);
  pid_t pid = ::fork();
  if (pid == 0) ExecRedirected(args.data(), envp.data(), out_file.c_str(), err_file.c_str());
  return pid;
}

// Exit code (or 128 + signal) if `pid` has exited, else nullopt. Reaps it.
inline std::optional<int> TryWait(pid_t pid) {
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {}
  if (r != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits at most timeout_s. On timeout the process is SIGKILLed (an ensembled's workers
// follow it through PR_SET_PDEATHSIG), reaped, *timed_out is set and -1 returned.
inline int WaitAtMost(pid_t pid, double timeout_s, bool* timed_out = nullptr) {
  auto t0 = SteadyClock::now();
  if (timed_out) *timed_out = false;
  for (;;) {
    if (auto code = TryWait(pid)) return *code;
    if (SecondsSince(t0) > timeout_s) {
      ::kill(pid, SIGKILL);
      Wait(pid);
      if (timed_out) *timed_out = true;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct TimedRun {
  int code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string out, err;
};

// Runs argv to completion (at most timeout_s) with `env` applied; output kept in scratch.
inline TimedRun RunWithEnv(const std::vector<std::string>& argv, const std::string& scratch_dir,
                           const EnvChanges& env = {}, double timeout_s = 120) {
  static int n = 0;
  std::string o = scratch_dir + "/envrun" + std::to_string(++n) + ".out";
  std::string e = scratch_dir + "/envrun" + std::to_string(n) + ".err";
  TimedRun r;
  auto t0 = SteadyClock::now();
  r.code = WaitAtMost(SpawnEnv(argv, o, e, env), timeout_s, &r.timed_out);
  r.seconds = SecondsSince(t0);
  r.out = ReadText(o);
  r.err = ReadText(e);
  return r;
}

// `ensembled run --config cfg`, bounded.
inline TimedRun RunEnsembled(const std::string& cfg, const std::string& scratch_dir, const EnvChanges& env = {},
                             double timeout_s = 120) {
  return RunWithEnv({BinaryPath("ensembled"), "run", "--config", cfg}, scratch_dir, env, timeout_s);
}

// Process state letter from /proc/PID/stat ('R', 'S', 'Z', ...), or 0 when there is no such process.
inline char ProcState(pid_t pid) {
  std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

// A process that exists and is not a zombie.
inline bool IsLive(pid_t pid) {
  char s = ProcState(pid);
  return s != 0 && s != 'Z' && s != 'X';
}

// Seconds since the process started (/proc/PID/stat starttime against /proc/uptime), or -1
// when there is no such process.
inline double ProcessAgeSeconds(pid_t pid) {
  std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  size_t at = stat.rfind(')');
  if (at == std::string::npos) return -1;
  std::istringstream fields(stat.substr(at + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {  // field 22: starttime, in clock ticks
    if (i < 22) continue;
    const double started = std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    return std::stod(ReadText("/proc/uptime")) - started;
  }
  return -1;
}

inline std::string CmdlineOf(pid_t pid) {
  std::string c = ReadText("/proc/" + std::to_string(pid) + "/cmdline");
  for (auto& ch : c)
    if (ch == '\0') ch = ' ';
  return c;
}

// ---- run state ----------------------------------------------------------------------------

inline std::vector<nlohmann::json> JournalOf(const std::string& state_dir) {
  auto recs = ReadJournal(RunLayout(state_dir).JournalFile());
  return recs.ok() ? *recs : std::vector<nlohmann::json>{};
}

inline int CountEvents(const std::vector<nlohmann::json>& recs, const std::string& event) {
  int n = 0;
  for (const auto& r : recs) n += r.value("event", "") == event;
  return n;
}

// member_done records with attempt > 1.
inline int RetriedMembers(const std::vector<nlohmann::json>& recs) {
  int n = 0;
  for (const auto& r : recs)
    if (r.value("event", "") == "member_done" && r.value("attempt", 1) > 1) ++n;
  return n;
}

// (round, member) -> number of member_done records.
inline std::map<std::pair<int, std::string>, int> DoneCounts(const std::vector<nlohmann::json>& recs) {
  std::map<std::pair<int, std::string>, int> out;
  for (const auto& r : recs)
    if (r.value("event", "") == "member_done") ++out[{r.value("round", -1), r.value("member", "")}];
  return out;
}

inline std::vector<std::string> MemberNames(int n) {
  std::vector<std::string> out;
  char buf[16];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "m%03d", i);
    out.push_back(buf);
  }
  return out;
}

// A member file's bytes by its member-directory path, whichever layout holds it (its own
// directory, or its pack's files: common/state/member_view.h); "" when neither does.
inline std::string ReadMemberText(const std::string& path) {
  auto bytes = ReadMemberFile(path);
  return bytes.ok() ? *bytes : std::string();
}

inline const char* const kMemberFiles[] = {"weights.bin",      "member.json",  "history.jsonl",
                                           "metrics.json",     "holdout_pred.f32", "pool_pred.f32"};

// "" when every file of a finished member directory is there (non-empty), else what is missing.
inline std::string MemberDirProblem(const std::string& dir) {
  std::string missing;
  for (const char* f : kMemberFiles)
    if (ReadMemberText(dir + "/" + f).empty()) missing += std::string(missing.empty() ? "" : ", ") + f;
  return missing.empty() ? "" : dir + ": missing or empty: " + missing;
}

// st_mtim in nanoseconds, or -1.
inline int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

inline std::string RunIdOf(const std::string& state_dir) {
  auto j = nlohmann::json::parse(ReadText(RunLayout(state_dir).RunFile()), nullptr, false);
  return j.is_object() ? j.value("run_id", "") : "";
}

// What a run may have left behind: named IPC objects whose names hold its run id (POSIX queues
// in /dev/mqueue, shared memory in /dev/shm; ensembled makes neither, its workers talk over
// unnamed socket pairs) and live worker processes serving it (`--run-id <id>` on their
// command line). Empty for a run that cleaned up, or whose supervisor died and took its workers.
inline std::vector<std::string> LeftoversOf(const std::string& run_id) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const char* dir : {"/dev/mqueue", "/dev/shm"})
    if (std::filesystem::is_directory(dir, ec))
      for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.path().filename().string().find(run_id) != std::string::npos) out.push_back(e.path().string());
  const std::string needle = std::string("--run-id") + '\0' + run_id + '\0';
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (ReadText("/proc/" + name + "/cmdline").find(needle) != std::string::npos && IsLive(pid))
      out.push_back("worker pid " + name);
  }
  return out;
}

// How member directories are compared.
enum class CompareMode {
  kTool,   // `ensemble-worker compare` on every pair of checkpoints (tensor by tensor, bitwise)
  kBytes,  // the checkpoint files byte for byte; `ensemble-worker compare` only on pairs that differ
};

// Compares member directories pairwise: the checkpoints (see CompareMode) and the raw prediction
// files byte for byte. Runs up to `parallel` compares at once. Returns "equal" or what differs.
inline std::vector<std::string> CompareMemberDirs(const std::vector<std::pair<std::string, std::string>>& pairs,
                                                  const std::string& scratch, CompareMode mode = CompareMode::kTool,
                                                  int parallel = 4) {
  std::vector<std::string> result(pairs.size(), "equal");
  std::vector<size_t> todo;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [a, b] = pairs[i];
    if (ReadMemberText(a + "/holdout_pred.f32") != ReadMemberText(b + "/holdout_pred.f32")) result[i] = "holdout predictions";
    else if (ReadMemberText(a + "/pool_pred.f32") != ReadMemberText(b + "/pool_pred.f32")) result[i] = "pool predictions";
    bool same_bytes = MemberFileExists(a + "/weights.bin") &&
                      ReadMemberText(a + "/weights.bin") == ReadMemberText(b + "/weights.bin");
    if (mode == CompareMode::kTool || !same_bytes) todo.push_back(i);
  }
  static int batch = 0;
  for (size_t next = 0; next < todo.size();) {
    std::vector<std::pair<size_t, pid_t>> running;
    ++batch;
    for (int k = 0; k < parallel && next < todo.size(); ++k, ++next) {
      size_t i = todo[next];
      std::string base = scratch + "/cmp" + std::to_string(batch) + "-" + std::to_string(k);
      // The member directories: compare loads each one's checkpoint (weights.bin or checkpoint.pt).
      running.emplace_back(i, Spawn({BinaryPath("ensemble-worker"), "compare", pairs[i].first, pairs[i].second},
                                    base + ".out", base + ".err"));
    }
    for (size_t k = 0; k < running.size(); ++k) {
      auto [i, pid] = running[k];
      int code = WaitAtMost(pid, 60);
      std::string base = scratch + "/cmp" + std::to_string(batch) + "-" + std::to_string(k);
      if (code != 0)
        result[i] = "checkpoint (compare exit " + std::to_string(code) + "): " + ReadText(base + ".out") +
                    ReadText(base + ".err");
    }
  }
  return result;
}

// Every member of rounds [0, rounds) of two runs, compared; returns "round/member: what" lines
// for the differing ones (empty: all equal).
inline std::vector<std::string> CompareRuns(const std::string& state_a, const std::string& state_b, int rounds,
                                            int members, const std::string& scratch,
                                            CompareMode mode = CompareMode::kTool) {
  RunLayout a(state_a), b(state_b);
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> labels;
  for (int r = 0; r < rounds; ++r)
    for (const auto& m : MemberNames(members)) {
      pairs.emplace_back(a.MemberDir(r, m), b.MemberDir(r, m));
      labels.push_back("r" + std::to_string(r) + "/" + m);
    }
  auto res = CompareMemberDirs(pairs, scratch, mode);
  std::vector<std::string> diffs;
  for (size_t i = 0; i < res.size(); ++i)
    if (res[i] != "equal") diffs.push_back(labels[i] + ": " + res[i]);
  return diffs;
}

// round_committed records of a finished run: {round, train_rows, trained_rows, generation, pool_used}.
inline std::vector<nlohmann::json> CommitFacts(const std::vector<nlohmann::json>& recs) {
  std::vector<nlohmann::json> out;
  for (const auto& r : recs)
    if (r.value("event", "") == "round_committed")
      out.push_back({{"round", r["round"]}, {"train_rows", r["train_rows"]}, {"trained_rows", r["trained_rows"]},
                     {"generation", r["generation"]}, {"pool_used", r["pool_used"]}});
  return out;
}

inline std::string Joined(const std::vector<std::string>& v, const char* sep = "\n") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace ens::testing
