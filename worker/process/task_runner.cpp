#include "worker/process/task_runner.h"

#include <malloc.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>

#include "common/base/atomic_file.h"
#include "common/base/env.h"
#include "common/base/env_vars.h"
#include "common/base/fault_injection.h"
#include "common/state/member_result.h"
#include "common/state/pack_results.h"
#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "worker/models/command_member.h"
#include "worker/train/trainer.h"

namespace ens {
namespace {

int64_t ProcStatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t klen = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, klen, key) == 0) return std::atoll(line.c_str() + klen);
  return 0;
}

std::string JsonLines(const std::vector<nlohmann::json>& rows) {
  std::string out;
  for (const auto& r : rows) out += r.dump() + "\n";
  return out;
}

// Where a pack's description lives: rounds/rNNNN/packs/<first task>-a<attempt>.json (members
// live in rounds/rNNNN/members/<name>). member.json refers to it by this relative path.
std::string PackFileName(const std::vector<TaskSpec>& tasks) {
  return RunLayout::PackFile(tasks[0].task_id, tasks[0].attempt);
}
std::string RoundDirOf(const TaskSpec& t) { return ParentDir(ParentDir(t.out_dir)); }

// The pack's description, once per pack (O(K)), so member files stay O(1): who trained together,
// on what data, in which attempt.
nlohmann::json PackDescription(const std::vector<TaskSpec>& tasks) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& t : tasks)
    members.push_back({{"member", t.member.name}, {"index", t.member_index}, {"seed", t.seed},
                       {"task_id", t.task_id}});
  const TaskSpec& t = tasks[0];
  return {{"round", t.round}, {"attempt", t.attempt}, {"size", tasks.size()}, {"generation", t.generation},
          {"rows", t.rows}, {"data_dir", t.data_dir}, {"excluded_file", t.excluded_file}, {"threads", t.threads},
          {"members", members}};
}

// Ends every task of the pack with `status` (none of them ran).
void FailPack(const Status& status, bool permanent, std::vector<TaskOutcome>* outs) {
  for (auto& o : *outs) {
    o.status = status;
    o.permanent = permanent;
  }
}

// Why the pack cannot train as one, or Ok. The supervisor packs only packable kinds (pack_plan.h):
// another kind in a pack is refused, naming it.
Status PackRefusal(const std::vector<TaskSpec>& tasks) {
  if (tasks.size() > 1)
    for (const auto& t : tasks)
      if (!TraitsOf(t.member.model.kind).packable)
        return Status::InvalidArgument("member " + t.member.name + ": a " + std::string(Name(t.member.model.kind)) +
                                       " member in a pack of " + std::to_string(tasks.size()) +
                                       " (such members train alone)");
  return Status::Ok();
}

// Writes the pack's description into its round's packs/ directory, unsynced: Publish flushes it
// with the members.
Status WritePackFile(const std::vector<TaskSpec>& tasks) {
  const std::string dir = RoundDirOf(tasks[0]) + "/packs";
  Status st = MakeDirs(dir);
  if (st.ok()) st = WriteFileUnsynced(RoundDirOf(tasks[0]) + "/" + PackFileName(tasks), PackDescription(tasks).dump(1) + "\n");
  return st;
}

// Each trained member's outcome: its metrics with the pack's time shared out (member_seconds)
// and the process's RSS, written as metrics.json last (the pack's time is known only now) where
// the task publishes; a member that failed gets its error.
void RecordOutcomes(const std::vector<TaskSpec>& tasks, double member_seconds, const TaskRunner::Progress& on_progress,
                    PackResultsWriter* pack, std::vector<TrainOutputs>* res, std::vector<TaskOutcome>* outs) {
  // Read once a pack (/proc/self/status costs about 6 us a read): the same for every member now.
  const int64_t rss_after = CurrentRssKb(), rss_peak = PeakRssKb();
  for (size_t k = 0; k < tasks.size(); ++k) {
    TrainOutputs& r = (*res)[k];
    TaskOutcome& out = (*outs)[k];
    if (!r.status.ok()) {
      out.status = r.status;
      out.permanent = r.permanent_failure;
      continue;  // a pack's records leave it out: Publish drops every member that failed
    }
    nlohmann::json& m = out.metrics;
    m = std::move(r.metrics);
    m.update({{"seconds", member_seconds}, {"rss_kb_after", rss_after}, {"rss_kb_peak", rss_peak}});
    if (!m.contains("train_seconds")) m["train_seconds"] = member_seconds;
    if (!tasks[k].publish) {  // its journaled directory stays as it is
      m["published"] = false;
      continue;
    }
    if (on_progress) on_progress(TaskPhase::kWriting, 0);
    if (pack != nullptr) pack->SetMetrics(tasks[k].member.name, m);
    else out.status = WriteFileUnsynced(MemberFiles(tasks[k].out_dir + ".tmp").Metrics(), m.dump(2) + "\n");
  }
}

// The outputs without what is written out (history, predictions, checkpoint, train state).
TrainOutputs ClearedOutputs(TrainOutputs res) {
  res.history = {};
  res.holdout_pred = {};
  res.pool_pred = {};
  res.train_state = {};
  res.checkpoint = {};
  return res;
}

double SecondsBetween(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Where a fused pack's time went outside its training loop, on every member of it (next to
// pack_train_seconds): "pack_prepare_seconds", the members' splits and directories and the
// pack file; "pack_outputs_seconds", the rest of TrainPack (the pack's model, then each
// member's module, predictions, holdout metrics and files but metrics.json).
void AddPackPhases(double prepare_seconds, double train_pack_seconds, std::vector<TrainOutputs>* res) {
  for (TrainOutputs& r : *res) {
    auto t = r.metrics.find("pack_train_seconds");
    if (!r.status.ok() || t == r.metrics.end()) continue;
    const double outputs = std::max(0.0, train_pack_seconds - t->get<double>());
    r.metrics.update({{"pack_prepare_seconds", prepare_seconds}, {"pack_outputs_seconds", outputs}});
  }
}

}  // namespace

int64_t CurrentRssKb() { return ProcStatusKb("VmRSS:"); }
int64_t PeakRssKb() { return ProcStatusKb("VmHWM:"); }

Status TaskRunner::EnsureMapped(const TaskSpec& task) {
  bool fresh = task.data_dir != data_dir_ || !train_ || train_->header().generation < task.generation ||
               train_->header().rows < task.rows;
  if (!fresh) return Status::Ok();
  // A newer generation of the table this process already checked: only the appended rows are
  // read (O(rows added)); another table, or a fresh process, checks all of it.
  auto train = DatasetView::Map(RunLayout::TrainSegment(task.data_dir),
                                task.data_dir == data_dir_ ? train_.get() : nullptr);
  train_.reset();
  if (!train.ok()) return train.status();
  if ((*train)->header().rows < task.rows)
    return Status::Corruption(RunLayout::TrainSegment(task.data_dir) + ": has " +
                              std::to_string((*train)->header().rows) + " rows, task needs " +
                              std::to_string(task.rows));
  if (task.data_dir != data_dir_ || !holdout_) {
    auto holdout = DatasetView::Map(RunLayout::HoldoutSegment(task.data_dir));
    if (!holdout.ok()) return holdout.status();
    auto pool = DatasetView::Map(RunLayout::PoolSegment(task.data_dir));
    if (!pool.ok()) return pool.status();
    holdout_ = std::move(*holdout);
    pool_ = std::move(*pool);
  }
  if (holdout_->header().features != (*train)->header().features ||
      pool_->header().features != (*train)->header().features)
    return Status::Corruption(task.data_dir + ": segments disagree on the feature count");
  if (holdout_->targets() != (*train)->targets() || pool_->targets() != (*train)->targets())
    return Status::Corruption(task.data_dir + ": segments disagree on the target count");
  train_ = std::move(*train);
  data_dir_ = task.data_dir;
  return Status::Ok();
}

Status TaskRunner::Prepare(const TaskSpec& task, TrainInputs* in, bool* permanent) {
  *permanent = false;
  Status st = EnsureMapped(task);
  if (!st.ok()) return st;
  in->task = &task;
  in->rows = train_->data();
  in->features = static_cast<int>(train_->header().features);
  in->targets = train_->targets();
  in->holdout = holdout_->data();
  in->holdout_rows = holdout_->header().rows;
  in->pool = pool_->data();
  in->pool_rows = pool_->header().rows;
  const uint64_t stride = train_->stride(), label = static_cast<uint64_t>(in->features);
  const float* table = in->rows;
  MemberRows::ClassOf class_of;
  if (task.classes > 0)  // stratified validation (member_rows.h); a classifier has one target
    class_of = [table, stride, label](uint64_t row) { return static_cast<uint32_t>(table[row * stride + label]); };
  auto split = MemberRows::Make(task, class_of);
  if (!split.ok()) {
    *permanent = true;
    return split.status();
  }
  in->split = std::move(*split);
  if (!task.publish) return Status::Ok();  // trained for its pack's sake; nothing is written
  if (pack_writer_) {  // its files go to the pack's (pack_results.h), its checkpoint with them
    in->checkpoint_in_memory = task.save_checkpoint;
    return Status::Ok();
  }
  std::string tmp = task.out_dir + ".tmp";
  st = RemoveTree(tmp);
  if (st.ok()) st = MakeDirs(tmp);
  // A kind built from layers (an MLP) predicts eagerly: its weights, no module (checkpoint.h).
  if (task.save_checkpoint)
    in->checkpoint_path = TraitsOf(task.member.model.kind).layers ? MemberFiles(tmp).Weights() : MemberFiles(tmp).Checkpoint();
  return st;
}

// Writes member k's directory, except metrics.json, to <out_dir>.tmp as soon as its outputs
// are made, unflushed (Publish flushes the pack at once), and drops the large outputs.
Status TaskRunner::WriteOutputs(const TrainInputs& in, TrainOutputs& res, int64_t rss_before,
                                const nlohmann::json& pack_ref) {
  const TaskSpec& task = *in.task;
  const std::string tmp = task.out_dir + ".tmp";
  const MemberFiles files(tmp);
  res.metrics.update({{"member", task.member.name}, {"round", task.round}, {"index", task.member_index},
                      {"seed", task.seed}, {"generation", task.generation}, {"train_rows", in.split.train_size()},
                      {"val_rows", in.split.val_size()}, {"threads", task.threads}, {"attempt", task.attempt},
                      {"pid", static_cast<int64_t>(::getpid())}, {"rss_kb_before", rss_before}});
  // "task" with "spec" as its member is exactly what the member was trained from: verify
  // replays it alone (a member's bits do not depend on its pack). The spec is written once,
  // not again inside "task". O(1) in the pack size.
  nlohmann::json member = {{"seed", task.seed},
                           {"round", task.round}, {"index", task.member_index},
                           {"generation", task.generation}, {"rows", task.rows},
                           {"excluded_file", task.excluded_file}, {"threads", task.threads},
                           {"norm", res.norm}};
  SetMemberRecordTask(task, &member);
  if (!pack_ref.is_null()) member["pack"] = pack_ref;
  if (WriteFailureRequested(task.task_id, task.attempt))  // test hook (fault_injection.h)
    return Status::IOError("write " + files.Member() + ": injected failure (ENSEMBLED_TEST_FAIL_WRITE)");
  if (pack_writer_) {
    const std::string history = JsonLines(res.history), holdout = FloatsToBytes(res.holdout_pred),
                      pool = FloatsToBytes(res.pool_pred);
    std::vector<std::pair<std::string, std::string_view>> named = {
        {BaseName(files.History()), history}, {BaseName(files.HoldoutPred()), holdout}, {BaseName(files.PoolPred()), pool}};
    if (!res.checkpoint_file.empty()) named.emplace_back(res.checkpoint_file, res.checkpoint);
    if (!res.train_state.empty()) named.emplace_back(BaseName(files.TrainState()), res.train_state);
    Status s = pack_writer_->AddFiles(task.member.name, named);
    if (!s.ok()) return s;
    pack_writer_->SetRecord(task.member.name, std::move(member));
    res = ClearedOutputs(std::move(res));
    return Status::Ok();
  }
  for (auto s : {WriteFileUnsynced(files.Member(), member.dump(2) + "\n"),
                 WriteFileUnsynced(files.History(), JsonLines(res.history)),
                 WriteFileUnsynced(files.HoldoutPred(), FloatsToBytes(res.holdout_pred)),
                 WriteFileUnsynced(files.PoolPred(), FloatsToBytes(res.pool_pred))})
    if (!s.ok()) return s;
  if (!res.train_state.empty()) {  // a warm_start member's, for its next round
    Status s = WriteFileUnsynced(files.TrainState(), res.train_state);
    if (!s.ok()) return s;
  }
  res = ClearedOutputs(std::move(res));
  return Status::Ok();
}

// Makes every written member of the pack durable and visible: one syncfs, a rename per
// member, one fsync per parent directory. A member whose step fails gets that error.
void TaskRunner::Publish(const std::vector<TaskSpec>& tasks, std::vector<TaskOutcome>* outs,
                         const Progress& on_progress) {
  std::vector<size_t> ready;
  for (size_t k = 0; k < tasks.size(); ++k)
    if (tasks[k].publish && (*outs)[k].status.ok()) ready.push_back(k);
  if (pack_writer_) {  // one directory for the pack: its records, then one syncfs and one rename
    for (size_t k = 0; k < tasks.size(); ++k)
      if (!(*outs)[k].status.ok()) pack_writer_->Drop(tasks[k].member.name);
    if (ready.empty()) return (void)RemoveTree(pack_writer_->tmp_dir());
    if (on_progress) on_progress(TaskPhase::kWriting, 0);
    Status st = pack_writer_->Finish();
    if (st.ok()) st = SyncFileSystem(pack_writer_->tmp_dir());
    if (st.ok()) st = pack_writer_->Publish();
    if (!st.ok())
      for (size_t k : ready) (*outs)[k].status = st;
    return;
  }
  if (ready.empty()) return;
  Status synced = SyncFileSystem(tasks[ready[0]].out_dir + ".tmp");
  if (!synced.ok()) {
    for (size_t k : ready) (*outs)[k].status = synced;
    return;
  }
  std::map<std::string, Status> parents;
  for (size_t k : ready) {
    if (on_progress) on_progress(TaskPhase::kWriting, 0);
    Status moved = SwapDirInto(tasks[k].out_dir + ".tmp", tasks[k].out_dir);
    if (moved.ok()) parents[ParentDir(tasks[k].out_dir)] = Status::Ok();
    (*outs)[k].status = moved;
  }
  for (auto& [dir, st] : parents) st = FsyncDir(dir);
  for (size_t k : ready) {
    auto p = parents.find(ParentDir(tasks[k].out_dir));
    if ((*outs)[k].status.ok() && p != parents.end() && !p->second.ok()) (*outs)[k].status = p->second;
  }
}

TrainOutputs TaskRunner::RunCommand(const TaskSpec& task, const TrainInputs& in, const Progress& on_progress) {
  TrainOutputs o;
  CommandMemberJob job;
  job.task = &task;
  job.train = train_.get();
  job.holdout = holdout_.get();
  job.split = &in.split;
  job.data_dir = task.data_dir;
  job.pool_rows = in.pool_rows;
  job.dir = task.out_dir + ".tmp";
  Status s = MakeDirs(job.dir);  // Prepare made it unless the task publishes nothing
  if (!s.ok()) {
    o.status = s;
    return o;
  }
  job.on_wait = [&] {
    if (on_progress) on_progress(TaskPhase::kTraining, 0);
  };
  CommandMemberResult r = RunCommandMember(job);
  o.status = std::move(r.status);
  o.permanent_failure = r.permanent;
  o.metrics = std::move(r.metrics);
  o.history = std::move(r.history);
  o.holdout_pred = std::move(r.holdout_pred);
  o.pool_pred = std::move(r.pool_pred);
  return o;
}

void TaskRunner::KeepCacheWithinPolicy(const std::function<void(const std::string&)>& on_note) {
  if (!runtime_->accelerated() || cache_.empty_above_bytes <= 0) return;
  auto stats = runtime_->Stats();
  if (!stats.ok() || stats->reserved < cache_.empty_above_bytes) return;
  Status s = runtime_->EmptyCache();
  if (!s.ok() && on_note) on_note("emptying the GPU cache: " + s.message());
}

TaskOutcome TaskRunner::Run(const TaskSpec& task, const Progress& on_progress) {
  std::vector<TaskOutcome> o = RunPack({task}, on_progress);
  return o[0];
}

// Prepares each task's inputs (its data mapped, its split made), each writing its outputs as
// soon as it has them. False when one member cannot run: the pack cannot be formed as planned,
// and every outcome has that member's error.
bool TaskRunner::PrepareInputs(const std::vector<TaskSpec>& tasks, const Progress& on_progress,
                               const std::function<void(const std::string&)>& on_note, int64_t rss_before,
                               std::vector<TrainInputs>* ins, std::vector<TaskOutcome>* outs) {
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (on_progress) on_progress(TaskPhase::kSetup, 0);
    SlowPhaseIfTold(Name(TaskPhase::kSetup));
    Status st = Prepare(tasks[k], &(*ins)[k], &(*outs)[k].permanent);
    if (!st.ok()) {
      FailPack(st, (*outs)[k].permanent, outs);
      return false;
    }
    TrainInputs& in = (*ins)[k];
    in.on_progress = on_progress;
    in.on_note = on_note;
    in.data_cache = device_data_.get();
    in.runtime = runtime_;
    in.lanes = runtime_->accelerated() ? runtime_->lanes() : nullptr;
    // gpu-check's measurement switches (trainer.h): operators per step, and the autograd loop
    // where PackStep would train (to set the two side by side on a GPU).
    in.count_ops = EnvVarValue(EnvVar::kCountOps) != nullptr;
    if (const char* path = EnvVarValue(EnvVar::kTrainPath); path != nullptr && std::string(path) == "autograd")
      in.path = TrainPath::kAutogradOps;
    // Called during RunPack, whose tasks, progress callback and inputs outlive it.
    in.on_outputs = [this, &tasks, &on_progress, ins, rss_before, k](TrainOutputs& o) {
      if (on_progress) on_progress(TaskPhase::kWriting, 0);
      HangIfTold(tasks[k].task_id, tasks[k].attempt, Name(TaskPhase::kWriting));
      SlowPhaseIfTold(Name(TaskPhase::kWriting));
      if (!tasks[k].publish) return;
      nlohmann::json pack_ref;
      if (tasks.size() > 1)
        pack_ref = {{"file", "../../" + PackFileName(tasks)}, {"size", tasks.size()}, {"position", k}};
      o.status = WriteOutputs((*ins)[k], o, rss_before, pack_ref);
    };
  }
  return true;
}

std::vector<TaskOutcome> TaskRunner::RunPack(const std::vector<TaskSpec>& tasks, const Progress& on_progress,
                                             const std::function<void(const std::string&)>& on_note) {
  auto t0 = CurrentEnv().SteadyNow();
  int64_t rss_before = CurrentRssKb();
  std::vector<TaskOutcome> outs(tasks.size());
  if (Status init = runtime_->Init(); !init.ok()) {  // the device cannot be used: no task can run here
    FailPack(init, true, &outs);
    return outs;
  }
  if (Status refused = PackRefusal(tasks); !refused.ok()) {  // say so if a member the planner never packs came
    FailPack(refused, true, &outs);
    return outs;
  }
  pack_writer_.reset();
  if (tasks.size() > 1 && tasks[0].pack_results &&
      std::any_of(tasks.begin(), tasks.end(), [](const TaskSpec& t) { return t.publish; })) {
    pack_writer_ = std::make_unique<PackResultsWriter>(RoundDirOf(tasks[0]) + "/" +
                                                       RunLayout::PackResultsDir(tasks[0].task_id, tasks[0].attempt));
    if (Status st = pack_writer_->Begin(); !st.ok()) {
      FailPack(st, false, &outs);
      return outs;
    }
  }
  std::vector<TrainInputs> ins(tasks.size());
  if (!PrepareInputs(tasks, on_progress, on_note, rss_before, &ins, &outs)) return outs;
  if (tasks.size() > 1) {  // flushed with the members (Publish); a failure fails the pack
    if (Status st = WritePackFile(tasks); !st.ok()) {
      for (auto& o : outs) o.status = st;
      return outs;
    }
  }
  auto t_prepared = CurrentEnv().SteadyNow();
  std::vector<TrainOutputs> res;
  if (TraitsOf(tasks[0].member.model.kind).program) {  // always a pack of one (pack_plan.h)
    res.push_back(RunCommand(tasks[0], ins[0], on_progress));
    if (res[0].status.ok()) ins[0].on_outputs(res[0]);
  } else {
    TrainPack(ins, &res);
    AddPackPhases(SecondsBetween(t0, t_prepared), SecondsBetween(t_prepared, CurrentEnv().SteadyNow()), &res);
  }
  // Model, optimizer and every tensor of the task died with the trainer's frame.
  if (std::any_of(res.begin(), res.end(), [](const TrainOutputs& r) { return r.device_lost; })) {
    for (size_t k = 0; k < tasks.size(); ++k) {  // nothing more may run in this context
      outs[k].device_lost = true;
      outs[k].status = res[k].status.ok() ? Status::Internal("CUDA context lost in this member's pack") : res[k].status;
    }
    return outs;
  }
  KeepCacheWithinPolicy(on_note);
  malloc_trim(0);
  double seconds = std::chrono::duration<double>(CurrentEnv().SteadyNow() - t0).count();
  RecordOutcomes(tasks, seconds / static_cast<double>(tasks.size()), on_progress, pack_writer_.get(), &res, &outs);
  Publish(tasks, &outs, on_progress);
  pack_writer_.reset();
  return outs;
}

}  // namespace ens
