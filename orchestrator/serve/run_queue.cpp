#include "orchestrator/serve/run_queue.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdio>

#include "orchestrator/gpu/gpu_share.h"

namespace ens {
namespace {

struct Transition {
  RunState from, to;
};
// The one table (run_queue.h says why each move happens).
constexpr Transition kTransitions[] = {
    {RunState::kQueued, RunState::kRunning},     {RunState::kQueued, RunState::kCancelled},
    {RunState::kQueued, RunState::kRejected},    {RunState::kRunning, RunState::kStopping},
    {RunState::kRunning, RunState::kFinished},   {RunState::kRunning, RunState::kFailed},
    {RunState::kRunning, RunState::kQueued},     {RunState::kRunning, RunState::kCancelled},
    {RunState::kStopping, RunState::kCancelled},  {RunState::kRunning, RunState::kPreempting},
    {RunState::kPreempting, RunState::kQueued},   {RunState::kPreempting, RunState::kFinished},
    {RunState::kPreempting, RunState::kFailed},   {RunState::kPreempting, RunState::kStopping},
};


std::string Gb(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3g GB", static_cast<double>(bytes) / 1073741824.0);
  return b;
}

std::string Plural(size_t n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); }

}  // namespace

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kQueued: return "queued";
    case RunState::kRunning: return "running";
    case RunState::kStopping: return "stopping";
    case RunState::kPreempting: return "preempting";
    case RunState::kFinished: return "finished";
    case RunState::kFailed: return "failed";
    case RunState::kCancelled: return "cancelled";
    case RunState::kRejected: return "rejected";
  }
  return "?";
}

bool IsEnded(RunState s) {
  return s == RunState::kFinished || s == RunState::kFailed || s == RunState::kCancelled || s == RunState::kRejected;
}

bool HoldsGrant(RunState s) {
  return s == RunState::kRunning || s == RunState::kStopping || s == RunState::kPreempting;
}

GrantPool::GrantPool(std::vector<ServeGpu> gpus, int cpu_workers) : gpus_(std::move(gpus)), cpu_workers_(cpu_workers) {
  for (const ServeGpu& g : gpus_) use_[g.id] = {};
}

const ServeGpu* GrantPool::Find(const std::string& id) const {
  for (const ServeGpu& g : gpus_)
    if (g.id == id) return &g;
  return nullptr;
}

bool GrantPool::Fits(const ServeGpu& gpu, const RunAsk& ask) const {
  const Use& u = use_.at(gpu.id);
  if (u.whole) return false;
  if (ask.gpu_share_bytes == 0) return u.shared_bytes == 0;
  return gpu.memory_bytes > 0 && u.shared_bytes + ask.gpu_share_bytes <= gpu.memory_bytes;
}

uint64_t GrantPool::shared_bytes(const std::string& id) const {
  auto it = use_.find(id);
  return it == use_.end() ? 0 : it->second.shared_bytes;
}

StatusOr<RunAsk> GrantPool::AskOf(const ResourcesSpec& r) const {
  if (r.executor != ExecutorKind::kLocal)
    return Status::InvalidArgument("/resources/executor: a served run's workers run on this machine (\"local\"); "
                                   "a Slurm run is started with `ensembled run`");
  RunAsk ask;
  if (r.gpus.none() || (r.gpus.kind == GpuSelection::Kind::kAuto && gpus_.empty())) {
    if (r.cpu_workers > cpu_workers_)
      return Status::InvalidArgument("/resources/cpu_workers: asks " + std::to_string(r.cpu_workers) + " CPU worker" +
                                     (r.cpu_workers == 1 ? "" : "s") + "; this daemon has " + std::to_string(cpu_workers_));
    ask.cpu_workers = r.cpu_workers;
    return ask;
  }
  if (r.gpu_memory_gb > 0)
    ask.gpu_share_bytes = static_cast<uint64_t>(r.gpu_memory_gb * 1073741824.0) +
                          static_cast<uint64_t>(r.workers_per_gpu) * kGpuContextReserveBytes;
  // The GPUs a share fits on at all (every GPU for a whole ask).
  auto can_hold = [&](const ServeGpu& g) { return ask.gpu_share_bytes == 0 || ask.gpu_share_bytes <= g.memory_bytes; };
  const std::string too_big = "/resources/gpu_memory_gb: " + Gb(ask.gpu_share_bytes) + " (" +
                              Gb(static_cast<uint64_t>(r.gpu_memory_gb * 1073741824.0)) + " and " + Gb(kGpuContextReserveBytes) +
                              " a worker for its CUDA context) does not fit ";
  std::vector<GpuCandidate> candidates;
  for (const ServeGpu& g : gpus_) candidates.push_back({g.id, g.index});
  const std::string what = "this daemon's " + Plural(gpus_.size(), "GPU");
  // A count is granted from whichever GPUs are free when the run starts: only its size is
  // checked here (the resolver's rule for a count), its GPUs picked by Take.
  StatusOr<std::vector<std::string>> picked = ResolveGpuSelection(r.gpus, candidates, "/resources/gpus", what);
  if (!picked.ok()) return picked.status();
  if (r.gpus.kind == GpuSelection::Kind::kCount) {
    int holders = static_cast<int>(std::count_if(gpus_.begin(), gpus_.end(), can_hold));
    if (r.gpus.count > holders)
      return Status::InvalidArgument(too_big + "on " + std::to_string(r.gpus.count) + " of this daemon's GPUs (" +
                                     std::to_string(holders) + " have that much memory, or their memory is unknown)");
    ask.gpu_count = r.gpus.count;
    return ask;
  }
  for (const std::string& id : *picked) {
    if (!can_hold(*Find(id))) return Status::InvalidArgument(too_big + "GPU " + id + " (" + Gb(Find(id)->memory_bytes) + ")");
    ask.gpus.push_back(id);
  }
  return ask;
}

int GrantPool::free_gpus() const {
  int n = 0;
  for (const auto& [id, u] : use_) n += !u.whole && u.shared_bytes == 0 ? 1 : 0;
  return n;
}

std::string GrantPool::WhyNotNow(const RunAsk& ask) const {
  const std::string each = ask.gpu_share_bytes > 0 ? " with " + Gb(ask.gpu_share_bytes) + " free" : "";
  if (ask.gpu_count > 0) {
    size_t fit = std::count_if(gpus_.begin(), gpus_.end(), [&](const ServeGpu& g) { return Fits(g, ask); });
    if (static_cast<int>(fit) >= ask.gpu_count) return "";
    if (ask.gpu_share_bytes == 0) return "needs " + Plural(ask.gpu_count, "GPU") + ", " + std::to_string(fit) + " free";
    return "needs " + Plural(ask.gpu_count, "GPU") + each + ", " + std::to_string(fit) + (fit == 1 ? " has it" : " have it");
  }
  if (ask.gpus.empty()) {
    if (ask.cpu_workers <= free_cpu_workers()) return "";
    return "needs " + Plural(ask.cpu_workers, "CPU worker") + ", " + std::to_string(free_cpu_workers()) + " free";
  }
  size_t fit = 0;
  for (const std::string& id : ask.gpus) fit += Fits(*Find(id), ask) ? 1 : 0;
  if (fit == ask.gpus.size()) return "";
  return "needs " + Plural(ask.gpus.size(), "GPU") + each + ", " + std::to_string(fit) + " of them " +
         (ask.gpu_share_bytes > 0 ? "have it" : "free");
}

Grant GrantPool::Take(const RunAsk& ask) {
  Grant g = ask;
  if (ask.gpu_count > 0) {
    std::vector<const ServeGpu*> order;
    for (const ServeGpu& gpu : gpus_)
      if (Fits(gpu, ask)) order.push_back(&gpu);
    // Whole: the lowest indices. A share: the least memory left after it first (the fullest
    // GPUs fill up; empty ones stay whole for whole asks), then the lowest index.
    std::stable_sort(order.begin(), order.end(), [&](const ServeGpu* a, const ServeGpu* b) {
      if (ask.gpu_share_bytes > 0) {
        uint64_t left_a = a->memory_bytes - use_.at(a->id).shared_bytes, left_b = b->memory_bytes - use_.at(b->id).shared_bytes;
        if (left_a != left_b) return left_a < left_b;
      }
      return a->index < b->index;
    });
    g.gpus.clear();
    for (const ServeGpu* gpu : order)
      if (static_cast<int>(g.gpus.size()) < ask.gpu_count) g.gpus.push_back(gpu->id);
    g.gpu_count = 0;
  }
  for (const std::string& id : g.gpus) {
    if (g.gpu_share_bytes > 0)
      use_[id].shared_bytes += g.gpu_share_bytes;
    else
      use_[id].whole = true;
  }
  cpu_used_ += g.cpu_workers;
  return g;
}

void GrantPool::Release(const Grant& g) {
  for (const std::string& id : g.gpus) {
    Use& u = use_[id];
    if (g.gpu_share_bytes > 0)
      u.shared_bytes -= std::min(u.shared_bytes, g.gpu_share_bytes);
    else
      u.whole = false;
  }
  cpu_used_ = std::max(0, cpu_used_ - g.cpu_workers);
}

Status RunQueue::Move(ServedRun& run, RunState to) {
  bool allowed = std::any_of(std::begin(kTransitions), std::end(kTransitions),
                             [&](const Transition& t) { return t.from == run.state && t.to == to; });
  if (!allowed)
    return Status::Internal("run " + run.name + ": no move from " + RunStateName(run.state) + " to " +
                            RunStateName(to));
  if (to == RunState::kRunning) {
    run.grant = pool_.Take(run.ask);
  } else if (HoldsGrant(run.state) && !HoldsGrant(to)) {  // held until its child is gone
    pool_.Release(run.grant);
    run.grant = {};
  }
  run.state = to;
  return Status::Ok();
}

std::vector<ServedRun*> RunQueue::StartOrder(const std::vector<ServedRun*>& runs) {
  std::vector<ServedRun*> queued;
  for (ServedRun* r : runs)
    if (r->state == RunState::kQueued) queued.push_back(r);
  std::stable_sort(queued.begin(), queued.end(), [](const ServedRun* a, const ServedRun* b) {
    if (a->resume_first != b->resume_first) return a->resume_first;
    if (a->priority != b->priority) return a->priority > b->priority;
    return a->seq < b->seq;
  });
  return queued;
}

std::vector<ServedRun*> RunQueue::PreemptFor(const ServedRun& waiting, const std::vector<ServedRun*>& runs,
                                             int min_gap) const {
  if (pool_.WhyNotNow(waiting.ask).empty()) return {};
  std::vector<ServedRun*> candidates;
  for (ServedRun* r : runs)
    if (r->state == RunState::kRunning && r != &waiting && r->priority <= waiting.priority - std::max(1, min_gap))
      candidates.push_back(r);
  std::stable_sort(candidates.begin(), candidates.end(), [](const ServedRun* a, const ServedRun* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    return a->seq > b->seq;
  });
  // The pool as it would be with `without` released: does the ask fit?
  auto fits_without = [&](const std::vector<ServedRun*>& without) {
    GrantPool sim = pool_;
    for (const ServedRun* r : without) sim.Release(r->grant);
    return sim.WhyNotNow(waiting.ask).empty();
  };
  std::vector<ServedRun*> victims;
  for (ServedRun* c : candidates) {
    victims.push_back(c);
    if (fits_without(victims)) break;
  }
  if (victims.empty() || !fits_without(victims)) return {};
  // None it does not need: the last added is needed; try the earlier ones (highest first).
  for (size_t i = victims.size() - 1; i-- > 0;) {
    std::vector<ServedRun*> fewer = victims;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    if (fits_without(fewer)) victims = std::move(fewer);
  }
  return victims;
}

std::vector<ServedRun*> RunQueue::StartNow(std::vector<ServedRun*> runs, double now) {
  std::vector<ServedRun*> started;
  for (ServedRun* r : StartOrder(runs)) {
    if (r->not_before > now) continue;  // a crashed run in its backoff keeps the reason it was given
    std::string why = pool_.WhyNotNow(r->ask);
    if (!why.empty()) {
      r->reason = r->preempted_by.empty() ? why : "preempted by run " + r->preempted_by + "; " + why;
      continue;
    }
    if (!Move(*r, RunState::kRunning).ok()) continue;  // cannot happen: only queued runs are here
    r->reason.clear();
    r->preempted_by.clear();
    started.push_back(r);
  }
  return started;
}

std::string DescribeGrant(const Grant& g) {
  if (g.gpu_count > 0)
    return Plural(g.gpu_count, "GPU") + " (any free)" + (g.gpu_share_bytes > 0 ? " with " + Gb(g.gpu_share_bytes) + " each" : "");
  if (g.gpus.empty()) return std::to_string(g.cpu_workers) + " CPU worker" + (g.cpu_workers == 1 ? "" : "s");
  std::string ids;
  for (const std::string& id : g.gpus) ids += (ids.empty() ? "" : ", ") + id;
  return Plural(g.gpus.size(), "GPU") + " (" + ids + ")" + (g.gpu_share_bytes > 0 ? " with " + Gb(g.gpu_share_bytes) + " each" : "");
}

}  // namespace ens
