// FakeExecutor: workers as threads of the test process, for testing the supervisor's round
// logic in-process (orchestrator/workers/executor.h's contract; used with a LocalTransport).
//
// A fake worker speaks the real protocol over the real socket pair: it says ready, takes
// `task` messages (pack_size 1), and does what the script says for (member, attempt):
//   kDone  writes metrics.json and deterministic predictions (member index and row) into the
//          task's out_dir, then reports done;
//   kFail  reports failed (transient), kFailPermanent reports failed permanent;
//   kDie   closes its channel and "exits" killed by SIGKILL, as a crashed worker does.
// Start failures can be scripted too (the first `failing_starts` starts fail). Signal(SIGTERM
// or SIGKILL) ends a fake worker, reported as killed by that signal. Everything it did is
// counted for the test to check. Thread-safe where the pool and the workers meet.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/state/member_result.h"
#include "common/ipc/protocol.h"
#include "common/ipc/worker_channel.h"
#include "orchestrator/workers/executor.h"

namespace ens::testing {

class FakeExecutor : public Executor {
 public:
  enum class Act { kDone, kFail, kFailPermanent, kDie };

  FakeExecutor(size_t holdout_rows, size_t pool_rows) : holdout_rows_(holdout_rows), pool_rows_(pool_rows) {}
  ~FakeExecutor() override { Release(); }

  // What the worker does with (member name, attempt); kDone when not scripted.
  void Script(const std::string& member, int attempt, Act act) { script_[{member, attempt}] = act; }
  int failing_starts = 0;     // this many Start calls fail (IOError) before any succeeds
  bool hopeless_start = false;  // Start fails with InvalidArgument (what sbatch's refusal is)

  StatusOr<WorkerHandle> Start(const WorkerLaunch& launch) override {
    ++starts_;
    if (hopeless_start) return Status::InvalidArgument("fake: this worker can never start");
    if (failing_starts > 0) {
      --failing_starts;
      return Status::IOError("fake: start failed");
    }
    int fd = ::dup(launch.channel_fd);
    auto channel = WorkerChannel::Adopt(fd);
    if (!channel.ok()) return channel.status();
    auto w = std::make_shared<Worker>();
    w->token = launch.token;
    w->slot = launch.slot;
    w->pid = 100000 + starts_;
    w->channel = std::move(*channel);
    {
      std::lock_guard<std::mutex> l(mu_);
      workers_[launch.token] = w;
    }
    w->thread = std::thread([this, w] { Serve(*w); });
    WorkerHandle h;
    h.token = launch.token;
    h.where = "fake worker " + std::to_string(w->pid);
    return h;
  }

  void Signal(const WorkerHandle& worker, int sig) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = workers_.find(worker.token);
    if (it == workers_.end()) return;
    it->second->signal = sig;
  }

  std::vector<WorkerExit> PollExits() override {
    std::vector<std::shared_ptr<Worker>> ended;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        if (it->second->ended) {
          ended.push_back(it->second);
          it = workers_.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::vector<WorkerExit> out;
    for (auto& w : ended) {
      w->thread.join();
      out.push_back({w->token, w->exit, w->exit.Describe()});
    }
    return out;
  }

  void Release() override {
    std::map<uint64_t, std::shared_ptr<Worker>> all;
    {
      std::lock_guard<std::mutex> l(mu_);
      all.swap(workers_);
    }
    for (auto& [t, w] : all) {
      w->signal = SIGKILL;
      if (w->thread.joinable()) w->thread.join();
    }
  }

  std::string name() const override { return "fake"; }
  int starts() const { return starts_; }
  int tasks_seen() const { return tasks_seen_; }
  int deaths() const { return deaths_; }

 private:
  struct Worker {
    uint64_t token = 0;
    int slot = 0;
    int64_t pid = 0;
    WorkerChannel channel;
    std::thread thread;
    std::atomic<int> signal{0};
    std::atomic<bool> ended{false};
    ExitInfo exit;
  };

  void Send(Worker& w, Message m) {
    m.slot = w.slot;
    m.pid = w.pid;
    (void)w.channel.Send(EncodeMessage(m), 1000);  // a full or closed channel: the pool will see
  }

  void Finish(Worker& w, ExitInfo e) {
    w.channel.Close();
    w.exit = e;
    w.ended = true;
  }

  // Writes what LoadMemberResult reads: predictions that depend on the member and the row.
  void WriteMember(const TaskSpec& t) {
    std::filesystem::create_directories(t.out_dir);
    std::vector<float> holdout(holdout_rows_), pool(pool_rows_);
    for (size_t i = 0; i < holdout.size(); ++i) holdout[i] = static_cast<float>(t.member_index + 0.01 * i);
    for (size_t i = 0; i < pool.size(); ++i)
      pool[i] = static_cast<float>(((t.member_index + 1) * (i + 7)) % 13);
    std::ofstream(t.out_dir + "/holdout_pred.f32", std::ios::binary) << FloatsToBytes(holdout);
    std::ofstream(t.out_dir + "/pool_pred.f32", std::ios::binary) << FloatsToBytes(pool);
    nlohmann::json m = {{"member", t.member.name}, {"round", t.round}, {"index", t.member_index},
                        {"seed", t.seed}, {"generation", t.generation}, {"train_rows", t.rows},
                        {"val_rows", 0}, {"epochs_run", 1}, {"best_epoch", 0}, {"best_val_loss", 0.5},
                        {"holdout_rmse", 1.0 + t.member_index}, {"holdout_mae", 1.0}, {"seconds", 0.01},
                        {"rss_kb_before", 0}, {"rss_kb_after", 0}, {"rss_kb_peak", 0}, {"threads", 1},
                        {"device", "fake"}};
    std::ofstream(t.out_dir + "/metrics.json") << m.dump();
  }

  void Serve(Worker& w) {
    Message ready;
    ready.type = MessageType::kReady;
    Send(w, ready);
    for (;;) {
      if (int sig = w.signal.load()) return Finish(w, ExitInfo{true, 0, sig});
      auto got = w.channel.Receive(20);
      if (!got.ok()) continue;
      if (got->kind == WorkerChannel::Received::kClosed) return Finish(w, ExitInfo{});
      if (got->kind != WorkerChannel::Received::kMessage) continue;
      auto m = DecodeMessage(got->bytes);
      if (!m.ok()) continue;
      if (m->type == MessageType::kShutdown) return Finish(w, ExitInfo{});
      if (m->type != MessageType::kTask) continue;
      const TaskSpec& t = m->task;
      ++tasks_seen_;
      Act act = Act::kDone;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto s = script_.find({t.member.name, t.attempt});
        if (s != script_.end()) act = s->second;
      }
      Message r;
      r.task_id = t.task_id;
      switch (act) {
        case Act::kDie:
          ++deaths_;
          return Finish(w, ExitInfo{true, 0, SIGKILL});
        case Act::kFail:
        case Act::kFailPermanent:
          r.type = MessageType::kFailed;
          r.error = "fake: scripted failure";
          r.permanent = act == Act::kFailPermanent;
          break;
        case Act::kDone:
          WriteMember(t);
          r.type = MessageType::kDone;
          r.metrics = {{"seconds", 0.01}};
          break;
      }
      Send(w, r);
    }
  }

  size_t holdout_rows_, pool_rows_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, Act> script_;
  std::map<uint64_t, std::shared_ptr<Worker>> workers_;
  std::atomic<int> starts_{0}, tasks_seen_{0}, deaths_{0};
};

}  // namespace ens::testing
