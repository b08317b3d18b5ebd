// LoadRunData (data_source.h): turns config.data into the run's train/holdout/pool tables.
// Every random choice derives from the run seed through the kData stream, so a run's data
// is reproducible from its config alone.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "common/data_source.h"
#include "common/seed.h"

namespace ens {

namespace {

// Distinct salts for the generators derived from the kData stream; part of the
// reproducibility contract, so never renumber.
constexpr uint64_t kTrainSalt = 1;
constexpr uint64_t kHoldoutSalt = 2;
constexpr uint64_t kPoolSalt = 3;
constexpr uint64_t kHoldoutSplitSalt = 4;

uint64_t DataSeed(uint64_t run_seed, uint64_t salt) {
  const uint64_t base = StreamSeed(SplitMix64(run_seed), SeedStream::kData);
  return SplitMix64(base ^ salt);
}

// A table with `like`'s columns and no rows (an absent pool).
Table EmptyLike(const Table& like) {
  Table t;
  t.features = like.features;
  t.feature_names = like.feature_names;
  t.target_name = like.target_name;
  return t;
}

Table SelectRows(const Table& src, const std::vector<size_t>& rows) {
  Table t = EmptyLike(src);
  t.x.reserve(rows.size() * src.features);
  t.y.reserve(rows.size());
  for (size_t r : rows) t.AppendRow(&src.x[r * src.features], src.y[r]);
  return t;
}

StatusOr<RunData> SyntheticRunData(const DataSpec& spec, uint64_t run_seed) {
  if (spec.synthetic_features < 5) {
    return Status::InvalidArgument("data.synthetic_features must be >= 5");
  }
  if (spec.initial_rows < 1 || spec.holdout_rows < 1 || spec.pool_rows < 0) {
    return Status::InvalidArgument(
        "data: initial_rows and holdout_rows must be >= 1, pool_rows >= 0");
  }
  const int f = spec.synthetic_features;
  const double noise = spec.synthetic_noise;
  RunData d;
  d.train = GenerateFriedman1(spec.initial_rows, f, noise, DataSeed(run_seed, kTrainSalt));
  d.holdout = GenerateFriedman1(spec.holdout_rows, f, noise, DataSeed(run_seed, kHoldoutSalt));
  d.pool = GenerateFriedman1(spec.pool_rows, f, noise, DataSeed(run_seed, kPoolSalt));
  return d;
}

// Moves a seeded-shuffled holdout_fraction of d->train into d->holdout. Both keep the
// file's row order, so a row's position still says where it came from.
Status SplitHoldout(const DataSpec& spec, const std::string& train_name, uint64_t run_seed,
                    RunData* d) {
  if (!(spec.holdout_fraction > 0.0 && spec.holdout_fraction < 1.0)) {
    return Status::InvalidArgument("data.holdout_fraction must be in (0, 1)");
  }
  const size_t n = d->train.rows();
  const long long want = std::llround(spec.holdout_fraction * static_cast<double>(n));
  if (want < 1 || static_cast<long long>(n) - want < 2) {
    return Status::InvalidArgument(
        train_name + ": dataset too small for holdout_fraction " +
        std::to_string(spec.holdout_fraction) + " (" + std::to_string(n) + " rows give " +
        std::to_string(want) + " holdout rows; need >= 1 holdout and >= 2 train rows)");
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  SeededRng rng(DataSeed(run_seed, kHoldoutSplitSalt));
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.Below(i + 1)]);
  const size_t keep = n - static_cast<size_t>(want);
  std::vector<size_t> train_rows(order.begin(), order.begin() + keep);
  std::vector<size_t> holdout_rows(order.begin() + keep, order.end());
  std::sort(train_rows.begin(), train_rows.end());
  std::sort(holdout_rows.begin(), holdout_rows.end());
  d->holdout = SelectRows(d->train, holdout_rows);
  d->train = SelectRows(d->train, train_rows);
  return Status::Ok();
}

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
  return Status::Ok();
}

StatusOr<RunData> CsvRunData(const DataSpec& spec, uint64_t run_seed) {
  if (spec.train_path.empty()) return Status::InvalidArgument("data.train_path is required");
  RunData d;
  StatusOr<Table> train = LoadCsv(spec.train_path, spec.feature_columns, spec.target_column);
  if (!train.ok()) return train.status();
  d.train = std::move(*train);
  if (spec.pool_path.empty()) {
    d.pool = EmptyLike(d.train);
  } else {
    StatusOr<Table> pool = LoadCsv(spec.pool_path, spec.feature_columns, spec.target_column);
    if (!pool.ok()) return pool.status();
    Status s = CheckSameColumns(d.train, spec.train_path, *pool, spec.pool_path);
    if (!s.ok()) return s;
    d.pool = std::move(*pool);
  }
  if (spec.holdout_path.empty()) {
    Status s = SplitHoldout(spec, spec.train_path, run_seed, &d);
    if (!s.ok()) return s;
    return d;
  }
  StatusOr<Table> holdout = LoadCsv(spec.holdout_path, spec.feature_columns, spec.target_column);
  if (!holdout.ok()) return holdout.status();
  Status s = CheckSameColumns(d.train, spec.train_path, *holdout, spec.holdout_path);
  if (!s.ok()) return s;
  d.holdout = std::move(*holdout);
  return d;
}

// An npy pair named explicitly or by a "<prefix>.x.npy"/"<prefix>.y.npy" prefix.
struct NpyPaths {
  std::string x, y;
  bool empty() const { return x.empty(); }
  std::string name() const { return x + " / " + y; }
};

StatusOr<NpyPaths> ResolveNpyPaths(const std::string& x, const std::string& y,
                                   const std::string& prefix, const std::string& what) {
  if (x.empty() != y.empty()) {
    return Status::InvalidArgument("data: " + what + " needs both x and y paths");
  }
  if (!x.empty()) return NpyPaths{x, y};
  if (!prefix.empty()) return NpyPaths{prefix + ".x.npy", prefix + ".y.npy"};
  return NpyPaths{};
}

StatusOr<RunData> NpyRunData(const DataSpec& spec, uint64_t run_seed) {
  StatusOr<NpyPaths> train_paths = ResolveNpyPaths(spec.x_path, spec.y_path, spec.train_path,
                                                   "train (x_path/y_path)");
  if (!train_paths.ok()) return train_paths.status();
  if (train_paths->empty()) {
    return Status::InvalidArgument("data.x_path and data.y_path are required");
  }
  StatusOr<NpyPaths> pool_paths = ResolveNpyPaths(spec.pool_x_path, spec.pool_y_path,
                                                  spec.pool_path, "pool (pool_x_path/pool_y_path)");
  if (!pool_paths.ok()) return pool_paths.status();
  const std::string train_name = train_paths->name();

  RunData d;
  StatusOr<Table> train = LoadNpyPair(train_paths->x, train_paths->y);
  if (!train.ok()) return train.status();
  d.train = std::move(*train);
  if (pool_paths->empty()) {
    d.pool = EmptyLike(d.train);
  } else {
    StatusOr<Table> pool = LoadNpyPair(pool_paths->x, pool_paths->y);
    if (!pool.ok()) return pool.status();
    Status s = CheckSameColumns(d.train, train_name, *pool, pool_paths->name());
    if (!s.ok()) return s;
    d.pool = std::move(*pool);
  }
  if (spec.holdout_path.empty()) {
    Status s = SplitHoldout(spec, train_name, run_seed, &d);
    if (!s.ok()) return s;
    return d;
  }
  const NpyPaths holdout_paths{spec.holdout_path + ".x.npy", spec.holdout_path + ".y.npy"};
  StatusOr<Table> holdout = LoadNpyPair(holdout_paths.x, holdout_paths.y);
  if (!holdout.ok()) return holdout.status();
  Status s = CheckSameColumns(d.train, train_name, *holdout, holdout_paths.name());
  if (!s.ok()) return s;
  d.holdout = std::move(*holdout);
  return d;
}

}  // namespace

StatusOr<RunData> LoadRunData(const DataSpec& spec, uint64_t run_seed) {
  if (spec.source == "synthetic") return SyntheticRunData(spec, run_seed);
  if (spec.source == "csv") return CsvRunData(spec, run_seed);
  if (spec.source == "npy") return NpyRunData(spec, run_seed);
  return Status::InvalidArgument("data.source: unknown source '" + spec.source +
                                 "' (want synthetic, csv or npy)");
}

}  // namespace ens
