#include "worker/task_runner.h"

#include <malloc.h>
#include <algorithm>
#include <cstring>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "common/atomic_file.h"
#include "common/fault_injection.h"
#include "common/member_result.h"
#include "common/run_layout.h"
#include "common/seed.h"
#include "worker/trainer.h"

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

// The member's split of rows [0, n): validation = the first round(f * n) of a seeded
// permutation (at least 1); training = the rest, or a bootstrap sample of the rest.
Status SplitRows(const TaskSpec& t, std::vector<int64_t>* train, std::vector<int64_t>* val) {
  std::vector<int64_t> rows;
  std::vector<uint64_t> excluded;
  if (!t.excluded_file.empty()) {
    auto bytes = ReadFile(t.excluded_file);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() % sizeof(uint64_t) != 0)
      return Status::Corruption(t.excluded_file + ": not a list of row ids");
    excluded.resize(bytes->size() / sizeof(uint64_t));
    std::memcpy(excluded.data(), bytes->data(), bytes->size());
    std::sort(excluded.begin(), excluded.end());
  }
  for (uint64_t i = 0; i < t.rows; ++i)
    if (!std::binary_search(excluded.begin(), excluded.end(), i)) rows.push_back(static_cast<int64_t>(i));
  uint64_t n = rows.size();
  uint64_t nval = static_cast<uint64_t>(std::llround(t.member.validation_split * static_cast<double>(n)));
  nval = std::max<uint64_t>(nval, 1);
  if (n < 2 || nval >= n)
    return Status::InvalidArgument("member " + t.member.name + ": " + std::to_string(n) +
                                   " training rows are too few for validation_split " +
                                   std::to_string(t.member.validation_split));
  std::vector<int64_t> perm = std::move(rows);
  SeededRng rng(StreamSeed(t.seed, SeedStream::kSplit));
  for (uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.Below(i)]);
  val->assign(perm.begin(), perm.begin() + nval);
  std::vector<int64_t> rest(perm.begin() + nval, perm.end());
  if (t.member.split == SplitKind::kBootstrap) {
    train->resize(rest.size());
    for (auto& r : *train) r = rest[rng.Below(rest.size())];
  } else {
    *train = std::move(rest);
  }
  return Status::Ok();
}

std::string JsonLines(const std::vector<nlohmann::json>& rows) {
  std::string out;
  for (const auto& r : rows) out += r.dump() + "\n";
  return out;
}

}  // namespace

int64_t CurrentRssKb() { return ProcStatusKb("VmRSS:"); }
int64_t PeakRssKb() { return ProcStatusKb("VmHWM:"); }

Status TaskRunner::EnsureMapped(const TaskSpec& task) {
  bool fresh = task.data_dir != data_dir_ || !train_ || train_->header().generation < task.generation ||
               train_->header().rows < task.rows;
  if (!fresh) return Status::Ok();
  train_.reset();
  auto train = DatasetView::Map(RunLayout::TrainSegment(task.data_dir));
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
  in->holdout = holdout_->data();
  in->holdout_rows = holdout_->header().rows;
  in->pool = pool_->data();
  in->pool_rows = pool_->header().rows;
  st = SplitRows(task, &in->train_idx, &in->val_idx);
  if (!st.ok()) {
    *permanent = true;
    return st;
  }
  if (!task.publish) return Status::Ok();  // trained for its pack's sake; nothing is written
  std::string tmp = task.out_dir + ".tmp";
  st = RemoveTree(tmp);
  if (st.ok()) st = MakeDirs(tmp);
  if (task.save_checkpoint) in->checkpoint_path = tmp + "/checkpoint.pt";
  return st;
}

// Writes the member directory from a trained result: <out_dir>.tmp, fsync, rename.
TaskOutcome TaskRunner::Finish(const TrainInputs& in, TrainOutputs& res, int64_t rss_before, double seconds) {
  const TaskSpec& task = *in.task;
  const std::string tmp = task.out_dir + ".tmp";
  TaskOutcome out;
  nlohmann::json& m = res.metrics;
  m.update({{"member", task.member.name}, {"round", task.round}, {"index", task.member_index},
            {"seed", task.seed}, {"generation", task.generation}, {"train_rows", in.train_idx.size()},
            {"val_rows", in.val_idx.size()}, {"threads", task.threads}, {"attempt", task.attempt},
            {"pid", static_cast<int64_t>(::getpid())}, {"rss_kb_before", rss_before},
            {"rss_kb_after", CurrentRssKb()}, {"rss_kb_peak", PeakRssKb()}, {"seconds", seconds}});
  if (!m.contains("train_seconds")) m["train_seconds"] = seconds;
  // "task" is exactly what the member was trained from: verify replays it alone (a member's
  // bits do not depend on its pack). O(1) in the pack size.
  nlohmann::json member = {{"spec", MemberToJson(task.member)}, {"seed", task.seed},
                           {"round", task.round}, {"index", task.member_index},
                           {"generation", task.generation}, {"rows", task.rows},
                           {"excluded_file", task.excluded_file}, {"threads", task.threads},
                           {"norm", res.norm}, {"task", TaskToJson(task)}};
  if (WriteFailureRequested(task.task_id, task.attempt)) {  // test hook (fault_injection.h)
    out.status = Status::IOError("write " + tmp + "/member.json: injected failure (ENSEMBLED_TEST_FAIL_WRITE)");
    return out;
  }
  // Every file fsynced, then the directory, then one rename publishes the member.
  // (SaveCheckpoint already wrote checkpoint.pt durably.)
  for (auto s : {WriteFileDurable(tmp + "/member.json", member.dump(2) + "\n"),
                 WriteFileDurable(tmp + "/history.jsonl", JsonLines(res.history)),
                 WriteFileDurable(tmp + "/holdout_pred.f32", FloatsToBytes(res.holdout_pred)),
                 WriteFileDurable(tmp + "/pool_pred.f32", FloatsToBytes(res.pool_pred)),
                 WriteFileDurable(tmp + "/metrics.json", m.dump(2) + "\n"), FsyncDir(tmp)}) {
    if (!s.ok()) {
      out.status = s;
      return out;
    }
  }
  out.status = MakeDirs(ParentDir(task.out_dir));
  if (out.status.ok()) out.status = RenameDirAtomic(tmp, task.out_dir);
  out.metrics = m;
  return out;
}

TaskOutcome TaskRunner::Run(const TaskSpec& task, const std::function<void(int)>& on_progress) {
  std::vector<TaskOutcome> o = RunPack({task}, on_progress);
  return o[0];
}

std::vector<TaskOutcome> TaskRunner::RunPack(const std::vector<TaskSpec>& tasks,
                                             const std::function<void(int)>& on_progress,
                                             const std::function<void(const std::string&)>& on_note) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t rss_before = CurrentRssKb();
  std::vector<TaskOutcome> outs(tasks.size());
  std::vector<TrainInputs> ins(tasks.size());
  for (size_t k = 0; k < tasks.size(); ++k) {
    Status st = Prepare(tasks[k], &ins[k], &outs[k].permanent);
    if (!st.ok()) {  // one member cannot run: the pack cannot be formed as planned
      for (auto& o : outs) {
        o.status = st;
        o.permanent = outs[k].permanent;
      }
      return outs;
    }
    ins[k].on_progress = on_progress;
    ins[k].on_note = on_note;
    ins[k].data_cache = device_data_.get();
  }
  std::vector<TrainOutputs> res;
  TrainPack(ins, &res);
  // Model, optimizer and every tensor of the task died with the trainer's frame.
  ReleaseTorchCaches();
  malloc_trim(0);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double member_seconds = seconds / static_cast<double>(tasks.size());
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (!res[k].status.ok()) {
      outs[k].status = res[k].status;
      outs[k].permanent = res[k].permanent_failure;
      continue;
    }
    if (!tasks[k].publish) {  // its journaled directory stays as it is
      outs[k].metrics = res[k].metrics;
      outs[k].metrics.update({{"published", false}, {"seconds", member_seconds}, {"rss_kb_after", CurrentRssKb()}});
      continue;
    }
    outs[k] = Finish(ins[k], res[k], rss_before, member_seconds);
  }
  return outs;
}

}  // namespace ens
