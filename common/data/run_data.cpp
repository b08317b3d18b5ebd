// LoadRunData (data_source.h): turns config.data into the run's train/holdout/pool tables.
// Every random choice derives from the run seed through the kData stream, so a run's data
// is reproducible from its config alone.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "common/config/class_list.h"
#include "common/data/data_source.h"
#include "common/base/seed.h"

namespace ens {

namespace {

// The holdout split's generator (DataSeed's salts: data_source.h; never renumbered).
constexpr uint64_t kHoldoutSplitSalt = 4;

// A table with `like`'s columns and no rows (an absent pool).
Table EmptyLike(const Table& like) {
  Table t;
  t.features = like.features;
  t.targets = like.targets;
  t.feature_names = like.feature_names;
  t.target_names = like.target_names;
  return t;
}

// `want` of [0, n) (sorted): the last `want` positions of a seeded Fisher-Yates pass from the
// top over [0, n). Position i of that pass is final after its step i, so only the first
// `want` steps are run, and only the positions they touch are held (a map of O(want)), never
// a permutation of n. Every version so far chose a regression holdout this way, bit for bit.
std::vector<uint64_t> ChooseHeld(uint64_t n, uint64_t want, uint64_t seed) {
  const uint64_t keep = n - want;
  std::unordered_map<uint64_t, uint64_t> moved;  // position -> row, where not the identity
  auto at = [&](uint64_t p) {
    auto it = moved.find(p);
    return it == moved.end() ? p : it->second;
  };
  SeededRng rng(seed);
  std::vector<uint64_t> rows;
  rows.reserve(static_cast<size_t>(want));
  for (uint64_t i = n; i-- > keep;) {
    const uint64_t j = rng.Below(i + 1);
    const uint64_t row_i = at(i), row_j = at(j);
    moved[j] = row_i;
    moved.erase(i);
    rows.push_back(row_j);  // position i now holds row_j, for good
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Which of train's rows form the holdout, decided row by row as they stream past (both parts
// keep the file's row order). Regression: round(holdout_fraction * n) rows of n (ChooseHeld).
// Classification (class_rows: train's rows per class): round(holdout_fraction * n_c) of each
// class c, chosen among that class's rows by their rank within the class.
class HoldoutChoice {
 public:
  static StatusOr<HoldoutChoice> Make(const DataSpec& spec, const std::string& train_name, uint64_t run_seed,
                                      uint64_t n, const std::vector<uint64_t>& class_rows) {
    if (!(spec.holdout_fraction > 0.0 && spec.holdout_fraction < 1.0)) {
      return Status::InvalidArgument("data.holdout_fraction must be in (0, 1)");
    }
    auto want_of = [&](uint64_t rows) {
      return static_cast<uint64_t>(std::llround(spec.holdout_fraction * static_cast<double>(rows)));
    };
    HoldoutChoice c;
    const uint64_t seed = DataSeed(run_seed, kHoldoutSplitSalt);
    uint64_t want = 0;
    if (class_rows.empty()) {
      want = want_of(n);
      if (want >= 1 && n - want >= 2) c.held_.push_back(ChooseHeld(n, want, seed));
    } else {
      for (size_t k = 0; k < class_rows.size(); ++k) {
        const uint64_t w = std::min(want_of(class_rows[k]), class_rows[k]);
        c.held_.push_back(ChooseHeld(class_rows[k], w, SplitMix64(seed ^ (k + 1))));
        want += w;
      }
    }
    if (want < 1 || n - want < 2) {
      return Status::InvalidArgument(
          train_name + ": dataset too small for holdout_fraction " + std::to_string(spec.holdout_fraction) + " (" +
          std::to_string(n) + " rows give " + std::to_string(want) +
          " holdout rows; need >= 1 holdout and >= 2 train rows)");
    }
    c.seen_.assign(c.held_.size(), 0);
    c.next_.assign(c.held_.size(), 0);
    return c;
  }

  // Whether the next row streamed, of target y, goes to the holdout.
  bool Take(float y) {
    const size_t k = held_.size() == 1 ? 0 : static_cast<size_t>(y);
    const uint64_t rank = seen_[k]++;
    if (next_[k] < held_[k].size() && held_[k][next_[k]] == rank) {
      ++next_[k];
      return true;
    }
    return false;
  }
  uint64_t size() const {
    uint64_t n = 0;
    for (const auto& h : held_) n += h.size();
    return n;
  }

 private:
  std::vector<std::vector<uint64_t>> held_;  // per class (one list for regression): sorted ranks
  std::vector<uint64_t> seen_, next_;
};

// `other` (a pool or holdout) must have train's feature columns, in train's order.
Status CheckSameColumns(const Table& train, const std::string& train_name, const Table& other,
                        const std::string& other_name) {
  const size_t n = std::min(train.feature_names.size(), other.feature_names.size());
  for (size_t i = 0; i < n; ++i) {
    if (train.feature_names[i] != other.feature_names[i]) {
      return Status::InvalidArgument(other_name + ": feature column " + std::to_string(i + 1) +
                                     " is '" + other.feature_names[i] + "' but " + train_name +
                                     " has '" + train.feature_names[i] + "'");
    }
  }
  if (train.features != other.features) {
    return Status::InvalidArgument(other_name + " has " + std::to_string(other.features) +
                                   " feature columns but " + train_name + " has " +
                                   std::to_string(train.features));
  }
  if (train.targets != other.targets) {
    return Status::InvalidArgument(other_name + " has " + std::to_string(other.targets) + " target columns but " +
                                   train_name + " has " + std::to_string(train.targets));
  }
  return Status::Ok();
}

// Streams f.train to train_chunk (less the holdout rows when no holdout file is given).
// class_rows: classification, train's rows per class (a stratified holdout); else empty.
StatusOr<RunData> StreamFiles(const DataSpec& spec, uint64_t run_seed, DataFiles f, size_t chunk_bytes,
                              const std::vector<uint64_t>& class_rows,
                              const std::function<Status(const Table&)>& train_chunk, uint64_t* train_rows) {
  RunData d;
  d.train = f.train->columns();
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(d.train.features + d.train.targets);
  const size_t chunk_rows = std::max<size_t>(1, chunk_bytes / row_bytes);
  // A pool or holdout file, loaded whole, with train's columns.
  auto load = [&](const std::function<StatusOr<Table>()>& loader, const std::string& name, Table* out) {
    StatusOr<Table> t = loader();
    if (!t.ok()) return t.status();
    Status s = CheckSameColumns(d.train, f.train_name, *t, name);
    if (s.ok()) *out = std::move(*t);
    return s;
  };
  d.pool = EmptyLike(d.train);
  if (f.load_pool)
    if (Status s = load(f.load_pool, f.pool_name, &d.pool); !s.ok()) return s;
  std::optional<HoldoutChoice> held;  // which train rows go to the holdout
  if (f.load_holdout) {
    if (Status s = load(f.load_holdout, f.holdout_name, &d.holdout); !s.ok()) return s;
  } else {
    auto rows = HoldoutChoice::Make(spec, f.train_name, run_seed, f.train->rows(), class_rows);
    if (!rows.ok()) {
      // Too few rows (a small file): a bad value in it is the more useful error, so read it.
      Table discard;
      do {
        if (Status s = f.train->Next(chunk_rows, &discard); !s.ok()) return s;
      } while (discard.rows() > 0);
      return rows.status();
    }
    held = std::move(*rows);
    d.holdout = EmptyLike(d.train);
    d.holdout.x.reserve(held->size() * static_cast<size_t>(d.train.features));
    d.holdout.y.reserve(held->size() * static_cast<size_t>(d.train.targets));
  }
  *train_rows = 0;
  Table chunk, kept = EmptyLike(d.train);
  while (true) {
    Status s = f.train->Next(chunk_rows, &chunk);
    if (!s.ok()) return s;
    if (chunk.rows() == 0) break;
    const Table* out = &chunk;
    if (held) {
      kept.x.clear();
      kept.y.clear();
      for (size_t r = 0; r < chunk.rows(); ++r) {
        const float* x = &chunk.x[r * static_cast<size_t>(chunk.features)];
        const float* y = chunk.TargetsOf(r);
        if (held->Take(*y)) {  // the first target: a classifier's class (stratified)
          d.holdout.AppendRow(x, y);
        } else {
          kept.AppendRow(x, y);
        }
      }
      out = &kept;
    }
    *train_rows += out->rows();
    if (out->rows() > 0) s = train_chunk(*out);
    if (!s.ok()) return s;
  }
  return d;
}

// Classification's first pass: every label of train, pool and holdout; train's per class.
StatusOr<ClassList> ScanClasses(const DataSpec& spec, uint64_t run_seed, std::vector<uint64_t>* class_rows) {
  LabelCollector train_labels, other_labels;
  auto f = OpenDataFiles(spec, run_seed, &train_labels, &other_labels);
  if (!f.ok()) return f.status();
  Table chunk;
  do {
    if (Status s = f->train->Next(size_t{1} << 14, &chunk); !s.ok()) return s;
  } while (chunk.rows() > 0);
  for (const auto* loader : {&f->load_pool, &f->load_holdout})
    if (*loader)
      if (auto t = (*loader)(); !t.ok()) return t.status();
  std::vector<std::string> labels;
  for (const auto* c : {&train_labels, &other_labels})
    for (const auto& [label, n] : c->counts()) labels.push_back(label);
  auto classes = ClassList::FromLabels(labels, f->train_name);
  if (!classes.ok()) return classes.status();
  class_rows->assign(static_cast<size_t>(classes->size()), 0);
  for (const auto& [label, n] : train_labels.counts()) (*class_rows)[static_cast<size_t>(classes->Index(label))] = n;
  return classes;
}

}  // namespace

StatusOr<RunData> StreamRunData(const DataSpec& spec, uint64_t run_seed, size_t chunk_bytes,
                                const std::function<Status(const Table&)>& train_chunk, uint64_t* train_rows,
                                TaskKind task) {
  ClassList classes;
  std::vector<uint64_t> class_rows;
  if (task == TaskKind::kClassification) {
    auto c = ScanClasses(spec, run_seed, &class_rows);
    if (!c.ok()) return c.status();
    classes = std::move(*c);
  }
  LabelMap* labels = classes.empty() ? nullptr : &classes;
  StatusOr<DataFiles> files = OpenDataFiles(spec, run_seed, labels, labels);
  if (!files.ok()) return files.status();
  auto d = StreamFiles(spec, run_seed, std::move(*files), chunk_bytes, class_rows, train_chunk, train_rows);
  if (d.ok()) d->classes = classes.names();
  return d;
}

StatusOr<RunData> LoadRunData(const DataSpec& spec, uint64_t run_seed, TaskKind task) {
  Table train;
  uint64_t rows = 0;
  auto add = [&train](const Table& chunk) {
    train.AppendRows(chunk);
    return Status::Ok();
  };
  auto d = StreamRunData(spec, run_seed, size_t{4} << 20, add, &rows, task);
  if (!d.ok()) return d.status();
  train.features = d->train.features;
  train.targets = d->train.targets;
  train.feature_names = d->train.feature_names;
  train.target_names = d->train.target_names;
  d->train = std::move(train);
  return d;
}

}  // namespace ens
