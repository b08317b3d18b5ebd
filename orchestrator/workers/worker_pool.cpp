#include "orchestrator/workers/worker_pool.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/base/atomic_file.h"
#include "common/base/cublas_workspace.h"
#include "common/state/run_layout.h"
#include "orchestrator/gpu/gpu_share.h"
#include "orchestrator/workers/process_limits.h"

namespace ens {

using Clock = std::chrono::steady_clock;
constexpr int kReadyBatch = 64;  // epoll events fetched per call
constexpr uint32_t kTransportTag = 0xFFFFFFFFu;  // epoll data of the transport's listener

const char* SlotStateName(SlotState s) {
  switch (s) {
    case SlotState::kDown: return "down";
    case SlotState::kStarting: return "starting";
    case SlotState::kIdle: return "idle";
    case SlotState::kBusy: return "busy";
    case SlotState::kStopping: return "stopping";
    case SlotState::kUnusable: return "unusable";
  }
  return "?";
}

namespace {

struct SlotMove {
  SlotState from;
  SlotEvent on;
  SlotState to;
};
using S = SlotState;
using E = SlotEvent;
// Every move a slot makes (worker_pool.h draws them).
constexpr SlotMove kSlotMoves[] = {
    {S::kDown, E::kSpawned, S::kStarting},       {S::kDown, E::kStartFailed, S::kDown},
    {S::kDown, E::kGivenUp, S::kUnusable},       {S::kStarting, E::kGivenUp, S::kUnusable},
    {S::kStarting, E::kReady, S::kIdle},         {S::kIdle, E::kAssigned, S::kBusy},
    {S::kBusy, E::kReported, S::kIdle},          {S::kBusy, E::kReportedRecycle, S::kStopping},
    {S::kStarting, E::kExited, S::kDown},        {S::kIdle, E::kExited, S::kDown},
    {S::kBusy, E::kExited, S::kDown},            {S::kStopping, E::kExited, S::kDown},
    {S::kStarting, E::kShutdown, S::kStopping},  {S::kIdle, E::kShutdown, S::kStopping},
    {S::kBusy, E::kShutdown, S::kStopping},      {S::kStopping, E::kShutdown, S::kStopping},
    {S::kDown, E::kReleased, S::kDown},          {S::kStarting, E::kReleased, S::kDown},
    {S::kIdle, E::kReleased, S::kDown},          {S::kBusy, E::kReleased, S::kDown},
    {S::kStopping, E::kReleased, S::kDown},
};

}  // namespace

std::optional<SlotState> NextSlotState(SlotState from, SlotEvent event) {
  for (const SlotMove& m : kSlotMoves)
    if (m.from == from && m.on == event) return m.to;
  return std::nullopt;
}

bool WorkerPool::Move(WorkerSlot& s, SlotEvent event) {
  std::optional<SlotState> to = NextSlotState(s.state, event);
  if (!to) return false;
  s.state = *to;
  return true;
}

void WorkerPool::GiveUp(WorkerSlot& s, std::string why) {
  if (Move(s, SlotEvent::kGivenUp)) s.unusable = std::move(why);
}

WorkerPool::WorkerPool(Executor* executor, Transport* transport, PoolOptions opts,
                       std::vector<WorkerPlacement> placements)
    : executor_(executor), transport_(transport), opts_(std::move(opts)) {
  slots_.resize(placements.size());
  for (size_t i = 0; i < placements.size(); ++i) slots_[i].placement = placements[i];
}

WorkerPool::~WorkerPool() {
  Shutdown(0);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

Status WorkerPool::Start() {
  if (Status s = FitProcessLimits(static_cast<int>(slots_.size()), opts_.threads_per_worker); !s.ok()) return s;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Status::FromErrno("epoll_create1", errno);
  if (transport_->listen_fd() >= 0) {
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.u32 = kTransportTag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, transport_->listen_fd(), &ev) != 0)
      return Status::FromErrno("epoll_ctl (the transport's listener)", errno);
  }
  for (auto& s : slots_) Spawn(s);
  return Status::Ok();
}

void WorkerPool::Disconnect(WorkerSlot& s) {
  if (!s.channel.valid()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.channel.fd(), nullptr);
  s.channel.Close();
}

void WorkerPool::Spawn(WorkerSlot& s) {
  WorkerLaunch l;
  // Four heartbeats per timeout, at most one a second: a slow beat never looks like silence.
  const int heartbeat_ms = static_cast<int>(std::clamp(opts_.heartbeat_timeout_s * 250.0, 10.0, 1000.0));
  l.argv = {opts_.worker_binary, "serve", "--run-id", opts_.run_id, "--slot", std::to_string(s.placement.slot),
            "--heartbeat-ms", std::to_string(heartbeat_ms),
            "--recycle-after-tasks", std::to_string(opts_.recycle.after_tasks),
            "--recycle-rss-mb", std::to_string(opts_.recycle.rss_mb),
            "--recycle-rss-growth-pct", std::to_string(opts_.recycle.rss_growth_pct),
            "--recycle-gpu-reserved-mb",
            std::to_string(WorkerReserveLimitMb(opts_.recycle.gpu_reserved_mb, s.placement.memory_limit_mb))};
  std::string threads = std::to_string(opts_.threads_per_worker);
  l.set_env = {{"CUDA_VISIBLE_DEVICES", s.placement.gpu},
               {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
               {kCublasWorkspaceVariable, kCublasWorkspaceConfig},
               {"OMP_NUM_THREADS", threads},
               {"MKL_NUM_THREADS", threads},
               {"ENSEMBLED_SLOT", std::to_string(s.placement.slot)}};
  if (s.placement.memory_fraction > 0) {
    const char* inherited = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    l.set_env.push_back({"PYTORCH_CUDA_ALLOC_CONF",
                         AllocatorConfWithFraction(inherited ? inherited : "", s.placement.memory_fraction)});
  }
  l.unset_env = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID"};
  // A new link per process: nothing a predecessor sent or left unread can reach this one.
  Disconnect(s);
  s.linked = false;
  l.token = NewSpawnToken();
  l.slot = s.placement.slot;
  WorkerChannel worker_end;
  auto mine = transport_->Offer(&l, &worker_end);
  s.spawns += 1;
  s.started_at = s.last_heard = Clock::now();
  s.tasks_done = 0;
  s.recycling = false;
  s.term_sent = {};
  auto failed_start = [&](const Status& why) {
    spdlog::error("slot {}: cannot start worker: {}", s.placement.slot, why.message());
    transport_->Forget(l.token);
    Move(s, SlotEvent::kStartFailed);
    s.respawn_at = Clock::now() + std::chrono::seconds(2);
    // A launch the executor calls hopeless (bad partition, no such program) is not retried.
    const bool hopeless = why.code() == Status::Code::kInvalidArgument || why.code() == Status::Code::kNotFound;
    if (hopeless || ++s.failed_starts >= kSlotStartBudget)
      GiveUp(s, hopeless ? "its worker cannot be started: " + why.message()
                         : "its worker could not be started " + std::to_string(s.failed_starts) +
                               " times in a row: " + why.message());
  };
  if (!mine.ok()) return failed_start(mine.status());
  auto handle = executor_->Start(l);
  worker_end.Close();  // the child holds the worker's end now
  if (!handle.ok()) return failed_start(handle.status());
  s.handle = *handle;
  s.pid = handle->pid;
  Move(s, SlotEvent::kSpawned);
  if (mine->valid()) Attach(s, std::move(*mine));
}

void WorkerPool::Attach(WorkerSlot& s, WorkerChannel channel) {
  s.channel = std::move(channel);
  s.linked = true;
  s.last_heard = Clock::now();
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(&s - slots_.data());
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s.channel.fd(), &ev) != 0)  // cannot hear it: its heartbeat times out
    spdlog::error("slot {}: {}", s.placement.slot, Status::FromErrno("epoll_ctl", errno).message());
}

void WorkerPool::Drain(WorkerSlot& s, std::vector<PoolEvent>* events) {
  // Bounded: a worker that floods its channel cannot keep the supervisor from the others.
  for (int n = 0; n < 256 && s.channel.valid(); ++n) {
    auto got = s.channel.Receive(0);
    if (!got.ok()) {
      ++bad_messages_;
      spdlog::warn("slot {}: rejected a report: {}", s.placement.slot, got.status().message());
      continue;
    }
    if (got->kind == WorkerChannel::Received::kNothing) return;
    if (got->kind == WorkerChannel::Received::kClosed) {
      // The process is exiting (Reap handles its exit), or it closed its end and lives on
      // (Service kills it after kill_grace_s: nobody can talk to it).
      Disconnect(s);
      s.link_lost_at = Clock::now();
      return;
    }
    HandleMessage(got->bytes, s, events);
  }
}

void WorkerPool::HandleMessage(const std::string& bytes, WorkerSlot& from, std::vector<PoolEvent>* events) {
  auto m = DecodeMessage(bytes);
  if (!m.ok()) {
    ++bad_messages_;
    spdlog::warn("slot {}: rejected a report: {}", from.placement.slot, m.status().message());
    return;
  }
  if (m->slot != from.placement.slot) {
    ++bad_messages_;
    spdlog::warn("slot {}: rejected a report that names slot {}", from.placement.slot, m->slot);
    return;
  }
  if (from.state == SlotState::kDown || (from.handle.pid != 0 && from.handle.pid != static_cast<pid_t>(m->pid))) {
    spdlog::debug("stale report from slot {} pid {}", m->slot, m->pid);
    return;
  }
  WorkerSlot* s = &from;
  s->last_heard = Clock::now();
  switch (m->type) {
    case MessageType::kReady:
      Move(*s, SlotEvent::kReady);
      if (s->handle.pid == 0) s->pid = static_cast<pid_t>(m->pid);  // a remote worker: its pid there
      s->failed_starts = 0;
      s->rss_kb = m->rss_kb;  // 0 from a worker that does not say: the first heartbeat will
      break;
    case MessageType::kUnusable:
      if (s->state == SlotState::kStarting) GiveUp(*s, m->error.empty() ? "unusable" : m->error);
      break;
    case MessageType::kHeartbeat:
      s->rss_kb = m->rss_kb;
      s->phase = m->phase;
      // The worker's own figure: NVML's per-process reading needs host PIDs (none in a container).
      if (m->gpu_reserved_kb > 0) s->gpu_reserved_mb = static_cast<double>(m->gpu_reserved_kb) / 1024.0;
      break;
    case MessageType::kDone:
    case MessageType::kFailed: {
      auto at = s->task_index.find(m->task_id);  // O(1): a pack of thousands reports one by one
      if (s->state != SlotState::kBusy || at == s->task_index.end()) {
        ++bad_messages_;
        spdlog::warn("slot {}: report for task {} it was not given", m->slot, m->task_id);
        return;
      }
      PoolEvent e;
      e.kind = m->type == MessageType::kDone ? PoolEvent::kDone : PoolEvent::kFailed;
      e.slot = s->placement.slot;
      e.pid = s->pid;
      const size_t given = at->second;
      e.task = std::move(s->tasks[given]);
      e.metrics = m->metrics;
      e.error = m->error;
      e.permanent = m->permanent;
      if (m->metrics.contains("rss_kb_after") && m->metrics["rss_kb_after"].is_number_integer())
        s->rss_kb = m->metrics["rss_kb_after"].get<int64_t>();
      if (m->metrics.contains("gpu_reserved_mb") && m->metrics["gpu_reserved_mb"].is_number())
        s->gpu_reserved_mb = m->metrics["gpu_reserved_mb"].get<double>();
      s->task_index.erase(at);
      if (given + 1 != s->tasks.size()) {  // the last task takes the reported one's place
        s->tasks[given] = std::move(s->tasks.back());
        s->task_index[s->tasks[given].task_id] = given;
      }
      s->tasks.pop_back();
      s->tasks_done += 1;
      if (s->tasks.empty()) {  // the whole task (or pack) is reported
        Move(*s, m->recycle ? SlotEvent::kReportedRecycle : SlotEvent::kReported);
        s->recycling = m->recycle;
        if (m->recycle) spdlog::info("slot {}: worker pid {} recycles: {}", s->placement.slot, s->pid, m->recycle_reason);
      }
      events->push_back(std::move(e));
      break;
    }
    default:
      ++bad_messages_;
      spdlog::warn("slot {}: unexpected message type {}", m->slot, MessageTypeName(m->type));
  }
}

void WorkerPool::Reap(std::vector<PoolEvent>* events) {
  for (const WorkerExit& exit : executor_->PollExits()) {
    transport_->Forget(exit.token);
    for (auto& s : slots_)
      if (s.handle.token == exit.token) HandleExit(s, exit, events);
  }
}

void WorkerPool::HandleExit(WorkerSlot& s, const WorkerExit& exit, std::vector<PoolEvent>* events) {
  const ExitInfo& x = exit.exit;
  const std::string who = "worker " + s.handle.where;
  Drain(s, events);  // it is gone: everything it sent is there to read, then the end of stream
  Disconnect(s);
  const std::string how = exit.how;
  bool planned = s.recycling && x.ok();
  if (planned) s.recycles += 1;
  else if (s.state != SlotState::kStopping) {
    spdlog::warn("slot {}: {} {}", s.placement.slot, who, how);
    ++unplanned_restarts_;
  }
  for (const TaskSpec& t : s.tasks) {
    PoolEvent e;
    e.kind = PoolEvent::kLost;
    e.slot = s.placement.slot;
    e.pid = s.pid;
    e.task = t;
    e.error = who + " " + how;
    e.killed_unasked = x.signaled && x.signal == SIGKILL && s.term_sent == Clock::time_point{} &&
                       s.state != SlotState::kStopping;
    events->push_back(std::move(e));
  }
  s.tasks.clear();
  s.task_index.clear();
  if (s.state == SlotState::kStarting && !x.signaled && x.code == 78)
    GiveUp(s, "the worker exited 78 (permanent) before it was ready; its log line above says why");
  // Restart budget: a worker that never gets as far as "ready" (a binary that cannot exec,
  // a library missing, a crash at start) would otherwise be respawned every second forever.
  if (s.state == SlotState::kStarting && !planned && ++s.failed_starts >= kSlotStartBudget)
    GiveUp(s, "its worker failed to start " + std::to_string(s.failed_starts) + " times in a row, never ready; the last one " +
                  how +
                  (!x.signaled && x.code == 127 ? " (the worker binary could not be executed: " + opts_.worker_binary + ")"
                                                : " (its log lines above say why)"));
  bool died_young = !planned && Clock::now() - s.started_at < std::chrono::seconds(10);
  s.respawn_at = Clock::now() + (died_young ? std::chrono::seconds(1) : std::chrono::seconds(0));
  Move(s, SlotEvent::kExited);  // a kUnusable slot stays so
  s.handle = {};
  s.pid = 0;
  s.linked = false;
}

std::vector<PoolEvent> WorkerPool::Service() {
  std::vector<PoolEvent> events;
  struct epoll_event ready[kReadyBatch];
  for (int n = kReadyBatch; n == kReadyBatch;) {
    n = ::epoll_wait(epoll_fd_, ready, kReadyBatch, 0);
    for (int i = 0; i < n; ++i)
      if (ready[i].data.u32 < slots_.size()) Drain(slots_[ready[i].data.u32], &events);
  }
  if (transport_->listen_fd() >= 0) {
    for (auto& [token, channel] : transport_->Accept()) {
      WorkerSlot* owner = nullptr;
      for (auto& s : slots_)
        if (s.handle.token == token && !s.linked) owner = &s;
      if (owner) Attach(*owner, std::move(channel));  // else its worker ended meanwhile: dropped
    }
  }
  Reap(&events);
  auto now = Clock::now();
  for (auto& s : slots_) {
    if (s.state == SlotState::kDown && now >= s.respawn_at) Spawn(s);
    bool silent = now - s.last_heard > std::chrono::duration<double>(opts_.heartbeat_timeout_s);
    // A remote worker that has not connected yet may be waiting in the scheduler's queue.
    bool watched = s.linked && (s.state == SlotState::kBusy || s.state == SlotState::kStarting);
    const bool link_lost = s.handle.valid() && s.linked && !s.channel.valid() && s.term_sent == Clock::time_point{} &&
                           now - s.link_lost_at > std::chrono::duration<double>(opts_.kill_grace_s);
    if (link_lost) {
      spdlog::warn("slot {}: worker {} closed its channel but did not exit: SIGKILL", s.placement.slot, s.handle.where);
      executor_->Signal(s.handle, SIGKILL);
      s.term_sent = now + std::chrono::hours(24);  // asked for; once
    } else if (watched && silent && s.handle.valid() && s.term_sent == Clock::time_point{}) {
      spdlog::warn("slot {}: worker {} silent for {:.0f} s: SIGTERM", s.placement.slot, s.handle.where,
                   opts_.heartbeat_timeout_s);
      executor_->Signal(s.handle, SIGTERM);
      s.term_sent = now;
    } else if (s.handle.valid() && s.term_sent != Clock::time_point{} &&
               now - s.term_sent > std::chrono::duration<double>(opts_.kill_grace_s)) {
      spdlog::warn("slot {}: worker {} ignored SIGTERM: SIGKILL", s.placement.slot, s.handle.where);
      executor_->Signal(s.handle, SIGKILL);
      s.term_sent = now + std::chrono::hours(24);  // once
    }
  }
  return events;
}

bool WorkerPool::Assign(const std::vector<TaskSpec>& tasks) {
  for (auto& s : slots_) {
    if (s.state != SlotState::kIdle || !s.channel.valid()) continue;  // no channel: about to go
    Message m;
    m.slot = s.placement.slot;
    m.type = MessageType::kTask;
    m.task = tasks[0];
    if (tasks.size() == 1 && EncodeMessage(m).size() <= kMaxMessageBytes) {
      // fits one message
    } else {
      // A pack (or a task with a very large member spec) does not fit a message: its tasks go
      // to a file the worker reads. Replaced, not flushed: the file only lives as long as the
      // assignment (a restarted supervisor dispatches the pack again), and the rename alone
      // keeps the worker from reading a torn one.
      m.type = MessageType::kPack;
      m.pack_file = RunLayout::SlotPackFile(opts_.pack_dir, s.placement.slot);
      Status w = WriteFileReplace(m.pack_file, PackFileText(tasks));
      if (!w.ok()) {
        spdlog::error("slot {}: {}", s.placement.slot, w.message());
        return false;
      }
    }
    Status st = s.channel.Send(EncodeMessage(m), 1000);
    if (!st.ok()) {
      spdlog::error("slot {}: cannot send task {}: {}", s.placement.slot, tasks[0].task_id, st.message());
      continue;
    }
    s.tasks = tasks;
    s.task_index.clear();
    for (size_t i = 0; i < tasks.size(); ++i) s.task_index[tasks[i].task_id] = i;
    Move(s, SlotEvent::kAssigned);
    s.phase = TaskPhase::kSetup;
    s.last_heard = Clock::now();
    return true;
  }
  return false;
}

std::string WorkerPool::Unusable() const {
  for (const auto& s : slots_)
    if (s.state == SlotState::kUnusable)
      return "slot " + std::to_string(s.placement.slot) + " (" +
             (s.placement.gpu.empty() ? std::string("CPU") : "GPU " + s.placement.gpu) + "): " + s.unusable;
  return "";
}

bool WorkerPool::AllReady() const {
  for (const auto& s : slots_)
    if (s.state == SlotState::kStarting || s.state == SlotState::kDown) return false;
  return true;
}

int WorkerPool::IdleCount() const {
  int n = 0;
  for (const auto& s : slots_) n += s.state == SlotState::kIdle;
  return n;
}

int WorkerPool::BusyCount() const {
  int n = 0;
  for (const auto& s : slots_) n += s.state == SlotState::kBusy;
  return n;
}

void WorkerPool::Shutdown(double timeout_s) {
  bool any = false;
  for (auto& s : slots_) {
    if (!s.handle.valid()) continue;
    any = true;
    Message m;
    m.type = MessageType::kShutdown;
    m.slot = s.placement.slot;
    if (s.channel.valid()) (void)s.channel.Send(EncodeMessage(m), 0);  // gone: it is exiting anyway
    else executor_->Signal(s.handle, SIGTERM);  // not connected (yet): nothing else reaches it
    Move(s, SlotEvent::kShutdown);
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  bool killed = false;
  while (any) {
    std::vector<PoolEvent> ignored;  // tasks of workers stopped on purpose are not outcomes
    Reap(&ignored);
    any = false;
    for (auto& s : slots_) any = any || s.handle.valid();
    if (!any) break;
    if (Clock::now() >= deadline) {
      if (killed) break;  // an executor that cannot confirm the end: Release() below settles it
      for (auto& s : slots_)
        if (s.handle.valid()) executor_->Signal(s.handle, SIGKILL);
      killed = true;
      const auto grace = Clock::now() + std::chrono::seconds(executor_->remote() ? 10 : 5);
      while (Clock::now() < grace) {
        Reap(&ignored);
        bool left = false;
        for (auto& s : slots_) left = left || s.handle.valid();
        if (!left) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  executor_->Release();
  for (auto& s : slots_) {
    Disconnect(s);
    s.handle = {};
    s.pid = 0;
    s.linked = false;
    Move(s, SlotEvent::kReleased);
  }
}

}  // namespace ens
