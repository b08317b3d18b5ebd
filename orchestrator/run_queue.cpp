#include "orchestrator/run_queue.h"

#include <algorithm>
#include <cctype>

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
    {RunState::kStopping, RunState::kCancelled},
};

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kQueued: return "queued";
    case RunState::kRunning: return "running";
    case RunState::kStopping: return "stopping";
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

GrantPool::GrantPool(std::vector<ServeGpu> gpus, int cpu_workers) : gpus_(std::move(gpus)), cpu_workers_(cpu_workers) {
  for (const ServeGpu& g : gpus_) gpu_taken_[g.id] = false;
}

StatusOr<RunAsk> GrantPool::AskOf(const ResourcesSpec& r) const {
  if (r.executor != ExecutorKind::kLocal)
    return Status::InvalidArgument("/resources/executor: a served run's workers run on this machine (\"local\"); "
                                   "a Slurm run is started with `ensembled run`");
  RunAsk ask;
  if (r.gpus_mode == "none" || (r.gpus_mode == "auto" && gpus_.empty())) {
    if (r.cpu_workers > cpu_workers_)
      return Status::InvalidArgument("/resources/cpu_workers: asks " + std::to_string(r.cpu_workers) + " CPU worker" +
                                     (r.cpu_workers == 1 ? "" : "s") + "; this daemon has " + std::to_string(cpu_workers_));
    ask.cpu_workers = r.cpu_workers;
    return ask;
  }
  if (r.gpus_mode == "auto") {
    for (const ServeGpu& g : gpus_) ask.gpus.push_back(g.id);
    return ask;
  }
  if (r.gpus_mode == "count") {
    if (r.gpu_count > static_cast<int>(gpus_.size()))
      return Status::InvalidArgument("/resources/gpus: asks " + std::to_string(r.gpu_count) + " GPU" +
                                     (r.gpu_count == 1 ? "" : "s") + "; this daemon has " + std::to_string(gpus_.size()));
    ask.gpu_count = r.gpu_count;
    return ask;
  }
  for (size_t i = 0; i < r.gpu_list.size(); ++i) {
    const std::string& want = r.gpu_list[i];
    std::vector<std::string> hits;
    for (const ServeGpu& g : gpus_) {
      bool hit = AllDigits(want) ? std::to_string(g.index) == want : g.id.rfind(want, 0) == 0;
      if (hit) hits.push_back(g.id);
    }
    if (hits.size() != 1)
      return Status::InvalidArgument("/resources/gpus/" + std::to_string(i) + ": '" + want + "' is " +
                                     (hits.empty() ? "none" : "more than one") + " of this daemon's " +
                                     std::to_string(gpus_.size()) + " GPUs");
    ask.gpus.push_back(hits[0]);
  }
  return ask;
}

int GrantPool::free_gpus() const {
  int n = 0;
  for (const auto& [id, taken] : gpu_taken_) n += taken ? 0 : 1;
  return n;
}

std::string GrantPool::WhyNotNow(const RunAsk& ask) const {
  if (ask.gpu_count > 0) {
    if (ask.gpu_count <= free_gpus()) return "";
    return "needs " + std::to_string(ask.gpu_count) + (ask.gpu_count == 1 ? " GPU, " : " GPUs, ") +
           std::to_string(free_gpus()) + " free";
  }
  if (ask.gpus.empty()) {
    if (ask.cpu_workers <= free_cpu_workers()) return "";
    return "needs " + std::to_string(ask.cpu_workers) + " CPU workers, " + std::to_string(free_cpu_workers()) + " free";
  }
  int busy = 0;
  for (const std::string& id : ask.gpus) busy += gpu_taken_.at(id) ? 1 : 0;
  if (busy == 0) return "";
  return "needs " + std::to_string(ask.gpus.size()) + " GPUs, " + std::to_string(ask.gpus.size() - busy) +
         " of them free";
}

Grant GrantPool::Take(const RunAsk& ask) {
  Grant g = ask;
  if (ask.gpu_count > 0) {
    std::vector<const ServeGpu*> by_index;
    for (const ServeGpu& gpu : gpus_) by_index.push_back(&gpu);
    std::stable_sort(by_index.begin(), by_index.end(),
                     [](const ServeGpu* a, const ServeGpu* b) { return a->index < b->index; });
    g.gpus.clear();
    for (const ServeGpu* gpu : by_index)
      if (static_cast<int>(g.gpus.size()) < ask.gpu_count && !gpu_taken_[gpu->id]) g.gpus.push_back(gpu->id);
    g.gpu_count = 0;
  }
  for (const std::string& id : g.gpus) gpu_taken_[id] = true;
  cpu_used_ += g.cpu_workers;
  return g;
}

void GrantPool::Release(const Grant& g) {
  for (const std::string& id : g.gpus) gpu_taken_[id] = false;
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
  } else if (run.state == RunState::kRunning || run.state == RunState::kStopping) {
    if (to != RunState::kStopping) {  // a stopping run holds its grant until its child is gone
      pool_.Release(run.grant);
      run.grant = {};
    }
  }
  run.state = to;
  return Status::Ok();
}

std::vector<ServedRun*> RunQueue::StartNow(std::vector<ServedRun*> runs, double now) {
  std::vector<ServedRun*> queued;
  for (ServedRun* r : runs)
    if (r->state == RunState::kQueued) queued.push_back(r);
  std::stable_sort(queued.begin(), queued.end(), [](const ServedRun* a, const ServedRun* b) {
    if (a->resume_first != b->resume_first) return a->resume_first;
    if (a->priority != b->priority) return a->priority > b->priority;
    return a->seq < b->seq;
  });
  std::vector<ServedRun*> started;
  for (ServedRun* r : queued) {
    if (r->not_before > now) continue;  // a crashed run in its backoff keeps the reason it was given
    std::string why = pool_.WhyNotNow(r->ask);
    if (!why.empty()) {
      r->reason = why;
      continue;
    }
    if (!Move(*r, RunState::kRunning).ok()) continue;  // cannot happen: only queued runs are here
    r->reason.clear();
    started.push_back(r);
  }
  return started;
}

std::string DescribeGrant(const Grant& g) {
  if (g.gpu_count > 0) return std::to_string(g.gpu_count) + " GPU" + (g.gpu_count == 1 ? "" : "s") + " (any free)";
  if (g.gpus.empty()) return std::to_string(g.cpu_workers) + " CPU worker" + (g.cpu_workers == 1 ? "" : "s");
  std::string ids;
  for (const std::string& id : g.gpus) ids += (ids.empty() ? "" : ", ") + id;
  return std::to_string(g.gpus.size()) + " GPU" + (g.gpus.size() == 1 ? "" : "s") + " (" + ids + ")";
}

}  // namespace ens
