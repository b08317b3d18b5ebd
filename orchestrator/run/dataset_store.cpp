#include "orchestrator/run/dataset_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "common/base/atomic_file.h"
#include "common/data/data_source.h"
#include "common/base/env.h"
#include "common/base/fault_injection.h"
#include "common/data/npy_writer.h"

namespace ens {
namespace {

using json = nlohmann::json;

// Rows of a training file are streamed into the segment in chunks of about this size.
constexpr size_t kLoadChunkBytes = size_t{8} << 20;

}  // namespace

Status DatasetStore::PublishFresh(const Config& cfg, const std::string& run_id, RunStartedRecord* started) {
  Status s = MakeDirs(layout_.DataDir());
  if (!s.ok()) return s;
  // Train rows go straight from the file into the segment, a chunk at a time (peak: holdout +
  // pool + a few chunks of kLoadChunkBytes). An npy y of several columns gets the check
  // validate-config makes of target_columns, at the first chunk, before the file is streamed.
  std::unique_ptr<DatasetWriter> writer;
  const std::string targets_from = "data " + (cfg.data.source == DataSource::kNpy ? cfg.data.y_path : cfg.data.train_path);
  auto add = [&](const Table& chunk) {
    if (!writer) {
      if (std::string why = TargetCountProblem(cfg, chunk.targets, targets_from); !why.empty())
        return Status::InvalidArgument(why);
      auto w = DatasetWriter::Begin(RunLayout::TrainSegment(layout_.DataDir()), chunk.features, 0, 0, chunk.targets);
      if (!w.ok()) return w.status();
      writer = std::move(*w);
    }
    return writer->AddRows(chunk);
  };
  uint64_t train_rows = 0;
  auto data = StreamRunData(cfg.data, cfg.run_seed, kLoadChunkBytes, add, &train_rows, cfg.task);
  if (!data.ok()) return data.status();
  RunData& d = *data;
  if (!d.classes.empty()) {
    auto classes = ClassList::FromLabels(d.classes, "data");
    if (!classes.ok()) return classes.status();
    classes_ = std::move(*classes);
  }
  if (!writer) return Status::InvalidArgument("data: no training rows");
  s = writer->Commit();
  if (!s.ok()) return s;
  for (auto* t : {&d.holdout, &d.pool}) t->features = d.train.features, t->targets = d.train.targets;
  auto holdout = DatasetWriter::Create(RunLayout::HoldoutSegment(layout_.DataDir()), d.holdout, 0);
  if (!holdout.ok()) return holdout.status();
  auto pool = DatasetWriter::Create(RunLayout::PoolSegment(layout_.DataDir()), d.pool, 0);
  if (!pool.ok()) return pool.status();
  train_ = std::move(writer);
  holdout_ = std::move(d.holdout);
  pool_ = std::move(d.pool);
  pool_used_.assign(pool_.rows(), false);
  s = PublishFeatureFiles();
  if (!s.ok()) return s;
  json run = {{"run_id", run_id}, {"run_name", cfg.run_name}, {"features", d.train.features},
              {"feature_names", d.train.feature_names}, {"target_name", d.train.target_names[0]},
              {"holdout_rows", holdout_.rows()}, {"pool_rows", pool_.rows()}};
  if (!classes_.empty()) run.update({{"task", Name(cfg.task)}, {"classes", classes_.ToJson()}});
  if (d.train.targets > 1) run.update({{"targets", d.train.targets}, {"target_names", d.train.target_names}});
  s = WriteFileAtomic(layout_.RunFile(), run.dump(2) + "\n");
  if (!s.ok()) return s;
  started->features = d.train.features;
  started->train_rows = train_rows;
  started->holdout_rows = holdout_.rows();
  started->pool_rows = pool_.rows();
  return Status::Ok();
}

Status DatasetStore::PublishFeatureFiles() const {
  for (auto [path, table] : {std::pair{RunLayout::HoldoutFeatures(layout_.DataDir()), &holdout_},
                             std::pair{RunLayout::PoolFeatures(layout_.DataDir()), &pool_}}) {
    if (std::filesystem::exists(path)) continue;  // written once; the tables never change
    const uint64_t f = static_cast<uint64_t>(table->features);
    Status s = WriteNpyFloat32(path + ".tmp", table->x.data(), table->rows(), f, f, /*durable=*/true);
    if (s.ok() && CurrentEnv().Rename(path + ".tmp", path) != 0)
      s = Status::FromErrno("rename " + path + ".tmp", errno);
    if (s.ok()) s = FsyncDir(layout_.DataDir());
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status DatasetStore::Reopen(const Config& cfg, const RunProgress& p) {
  auto train = DatasetWriter::Open(RunLayout::TrainSegment(layout_.DataDir()));
  if (!train.ok()) return train.status();
  train_ = std::move(*train);
  // Rows appended by a mutation whose round never committed are rolled back; the mutation
  // is then decided again, identically, and applied exactly once.
  if (train_->header().rows != p.train_rows || train_->header().generation != p.generation) {
    spdlog::info("rolling {} back to generation {} ({} rows)", train_->path(), p.generation, p.train_rows);
    Status s = train_->Rollback(p.train_rows, p.generation);
    if (!s.ok()) return s;
  }
  for (auto [path, table] : {std::pair{RunLayout::HoldoutSegment(layout_.DataDir()), &holdout_},
                             std::pair{RunLayout::PoolSegment(layout_.DataDir()), &pool_}}) {
    auto w = DatasetWriter::Open(path);
    if (!w.ok()) return w.status();
    auto t = (*w)->Read(0, (*w)->header().rows);
    if (!t.ok()) return t.status();
    *table = std::move(*t);
  }
  Status s = PublishFeatureFiles();  // a run started before they existed gets them now
  if (s.ok() && cfg.task == TaskKind::kClassification) s = ReadClasses();
  if (!s.ok()) return s;
  pool_used_.assign(pool_.rows(), false);
  for (uint64_t id : p.pool_used)
    if (id < pool_used_.size()) pool_used_[id] = true;
  if (!p.committed.empty()) excluded_file_ = p.committed.back().excluded_file;
  return ReadExcluded();
}

// The class list is the run's, fixed at its start (run.json).
Status DatasetStore::ReadClasses() {
  auto text = ReadFile(layout_.RunFile());
  if (!text.ok()) return text.status();
  json run = json::parse(*text, nullptr, false);
  if (!run.is_object() || !run.contains("classes"))
    return Status::InvalidArgument(layout_.RunFile() + ": no \"classes\": this run was not started as a classification run");
  auto classes = ClassList::FromJson(run["classes"], layout_.RunFile());
  if (!classes.ok()) return classes.status();
  classes_ = std::move(*classes);
  return Status::Ok();
}

Status DatasetStore::ReadExcluded() {
  excluded_.clear();
  if (excluded_file_.empty()) return Status::Ok();
  auto bytes = ReadFile(excluded_file_);
  if (!bytes.ok()) return bytes.status();
  excluded_.resize(bytes->size() / sizeof(uint64_t));
  std::memcpy(excluded_.data(), bytes->data(), excluded_.size() * sizeof(uint64_t));
  std::sort(excluded_.begin(), excluded_.end());  // files of earlier versions may repeat ids
  excluded_.erase(std::unique(excluded_.begin(), excluded_.end()), excluded_.end());
  return Status::Ok();
}

StatusOr<AppliedMutation> DatasetStore::Append(const Mutation& mut, uint64_t generation) {
  Table rows;
  rows.features = mut.add.features;
  rows.targets = mut.add.targets;
  for (uint64_t id : mut.pool_ids) rows.AppendRow(&pool_.x[id * pool_.features], pool_.TargetsOf(id));
  for (size_t r = 0; r < mut.add.rows(); ++r) rows.AppendRow(&mut.add.x[r * rows.features], mut.add.TargetsOf(r));
  AppliedMutation out;
  out.generation = generation;
  Status s = train_->Append(rows, out.generation);
  if (!s.ok()) return s;
  CrashPoint("after_mutation_append");
  out.excluded_file = excluded_file_;
  // excluded_ stays sorted and unique: a row dropped twice is dropped once, and its size is
  // the number of rows no member trains on.
  std::vector<uint64_t> merged;
  merged.reserve(excluded_.size() + mut.drop.size());
  std::set_union(excluded_.begin(), excluded_.end(), mut.drop.begin(), mut.drop.end(), std::back_inserter(merged));
  out.dropped = merged.size() - excluded_.size();
  if (out.dropped > 0) {
    excluded_ = std::move(merged);
    out.excluded_file = std::filesystem::absolute(RunLayout::ExcludedRows(layout_.DataDir(), out.generation)).string();
    s = WriteFileAtomic(out.excluded_file, std::string(reinterpret_cast<const char*>(excluded_.data()),
                                                       excluded_.size() * sizeof(uint64_t)));
    if (!s.ok()) return s;
  }
  out.pool_ids = mut.pool_ids;
  out.added = rows.rows();
  out.dropped_rows = excluded_.size();
  return out;
}

void DatasetStore::MarkCommitted(const AppliedMutation& m) {
  for (uint64_t id : m.pool_ids) pool_used_[id] = true;
  excluded_file_ = m.excluded_file;
}

}  // namespace ens
