#include "orchestrator/mutation_policy.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/seed.h"
#include "orchestrator/ensemble_summary.h"

namespace ens {
namespace {

std::vector<uint64_t> UnusedPoolRows(const MutationContext& c) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < c.pool->rows(); ++i)
    if (!(*c.pool_used)[i]) ids.push_back(i);
  return ids;
}

Mutation AppendFromPool(const MutationSpec& spec, const MutationContext& c) {
  std::vector<uint64_t> ids = UnusedPoolRows(c);
  SeededRng rng(SplitMix64(c.run_seed ^ SplitMix64(0xA99E4D + static_cast<uint64_t>(c.round))));
  size_t k = std::min<size_t>(static_cast<size_t>(spec.k), ids.size());
  for (size_t i = 0; i < k; ++i) std::swap(ids[i], ids[i + rng.Below(ids.size() - i)]);
  Mutation m;
  m.add.features = c.features;
  m.pool_ids.assign(ids.begin(), ids.begin() + k);
  return m;
}

Mutation QueryByCommittee(const MutationSpec& spec, const MutationContext& c) {
  std::vector<const std::vector<float>*> preds;
  for (const auto& r : *c.members) preds.push_back(&r.pool_pred);
  std::vector<double> spread = PredictionStd(preds);
  std::vector<uint64_t> ids = UnusedPoolRows(c);
  size_t k = std::min<size_t>(static_cast<size_t>(spec.k), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](uint64_t a, uint64_t b) {
    return spread[a] != spread[b] ? spread[a] > spread[b] : a < b;
  });
  Mutation m;
  m.add.features = c.features;
  m.pool_ids.assign(ids.begin(), ids.begin() + k);
  return m;
}

// Runs argv with `input` on stdin; returns stdout. Enforces exit 0 and the timeout.
StatusOr<std::string> RunCommand(const std::vector<std::string>& argv, const std::string& input,
                                 double timeout_s, const std::function<bool()>& on_wait) {
  constexpr int kWaitTickMs = 200;
  const std::string name = argv[0];
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return Status::FromErrno("pipe", err);
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    return Status::FromErrno("fork for mutation command", err);
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a timeout kills whatever it started too
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  // SIGPIPE is ignored process-wide by ensembled's main(); a closed stdin shows up as EPIPE.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string out;
  size_t written = 0;
  int wfd = in_pipe[1], rfd = out_pipe[0];
  if (input.empty()) {
    ::close(wfd);
    wfd = -1;
  }
  bool timed_out = false, abandoned = false;
  const size_t kMaxOutput = 256u << 20;
  while (rfd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p[2] = {{rfd, POLLIN, 0}, {wfd, POLLOUT, 0}};
    int r = ::poll(p, wfd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left.count(), kWaitTickMs)));
    if (r < 0 && errno != EINTR) break;
    if (on_wait && !on_wait()) {
      abandoned = true;
      break;
    }
    if (wfd >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(wfd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN) written = input.size();
      if (written == input.size()) {
        ::close(wfd);
        wfd = -1;
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = ::read(rfd, buf, sizeof(buf));
      if (n > 0) out.append(buf, static_cast<size_t>(n));
      if (n == 0 || out.size() > kMaxOutput) {
        ::close(rfd);
        rfd = -1;
      }
    }
  }
  if (wfd >= 0) ::close(wfd);
  if (rfd >= 0) ::close(rfd);
  if (timed_out || abandoned) ::kill(-pid, SIGKILL);
  int status = 0;
  int spins = 0;
  while (!timed_out && !abandoned) {  // output closed: give the program the rest of the timeout to exit
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    ::usleep(10000);
    if (on_wait && ++spins % (kWaitTickMs / 10) == 0 && !on_wait()) {
      abandoned = true;
      ::kill(-pid, SIGKILL);
    }
  }
  if (abandoned) {
    ::waitpid(pid, &status, 0);
    return Status::Cancelled("mutation command " + name + " abandoned: the daemon is stopping");
  }
  if (timed_out) {
    ::waitpid(pid, &status, 0);
    return Status::Timeout("mutation command " + name + " did not finish within " +
                           std::to_string(timeout_s) + " s");
  }
  if (out.size() > kMaxOutput) return Status::InvalidArgument("mutation command " + name + ": output too large");
  if (WIFSIGNALED(status))
    return Status::InvalidArgument("mutation command " + name + " was killed by signal " +
                                   std::to_string(WTERMSIG(status)));
  if (WEXITSTATUS(status) != 0)
    return Status::InvalidArgument("mutation command " + name + " exited with " +
                                   std::to_string(WEXITSTATUS(status)) +
                                   (WEXITSTATUS(status) == 127 ? " (not found or not executable)" : ""));
  return out;
}

}  // namespace

StatusOr<Mutation> ParseCommandOutput(const std::string& text, int features, uint64_t train_rows,
                                      const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(origin + ": output is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "add" && it.key() != "drop")
      return Status::InvalidArgument(origin + ": /" + it.key() + ": unknown key");
  Mutation m;
  m.add.features = features;
  if (j.contains("add")) {
    if (!j["add"].is_array()) return Status::InvalidArgument(origin + ": /add: must be an array of rows");
    std::vector<float> row(features);
    for (size_t r = 0; r < j["add"].size(); ++r) {
      const auto& a = j["add"][r];
      std::string where = origin + ": /add/" + std::to_string(r);
      if (!a.is_array() || a.size() != static_cast<size_t>(features) + 1)
        return Status::InvalidArgument(where + ": must be an array of " + std::to_string(features + 1) +
                                       " numbers (features then target)");
      for (size_t c = 0; c < a.size(); ++c) {
        double v = a[c].is_number() ? a[c].get<double>() : NAN;
        if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
          return Status::InvalidArgument(where + "/" + std::to_string(c) + ": not a finite float32 number");
      }
      for (int c = 0; c < features; ++c) row[c] = a[c].get<float>();
      m.add.AppendRow(row.data(), a[features].get<float>());
    }
  }
  if (j.contains("drop")) {
    if (!j["drop"].is_array()) return Status::InvalidArgument(origin + ": /drop: must be an array of row ids");
    for (size_t i = 0; i < j["drop"].size(); ++i) {
      const auto& d = j["drop"][i];
      if (!d.is_number_unsigned() || d.get<uint64_t>() >= train_rows)
        return Status::InvalidArgument(origin + ": /drop/" + std::to_string(i) + ": not a row id below " +
                                       std::to_string(train_rows));
      m.drop.push_back(d.get<uint64_t>());
    }
    std::sort(m.drop.begin(), m.drop.end());
    m.drop.erase(std::unique(m.drop.begin(), m.drop.end()), m.drop.end());
  }
  return m;
}

StatusOr<Mutation> DecideMutation(const MutationSpec& spec, const MutationContext& c) {
  if (spec.policy == "append_from_pool") return AppendFromPool(spec, c);
  if (spec.policy == "query_by_committee") return QueryByCommittee(spec, c);
  if (spec.policy == "command") {
    auto out = RunCommand(spec.argv, c.round_summary.dump() + "\n", spec.timeout_s, c.on_wait);
    if (!out.ok()) return out.status();
    return ParseCommandOutput(*out, c.features, c.train_rows, "mutation command " + spec.argv[0]);
  }
  Mutation none;
  none.add.features = c.features;
  return none;
}

}  // namespace ens
