// LoadRunData (data_source.h): turns config.data into the run's train/holdout/pool tables.
// Every random choice derives from the run seed through the kData stream, so a run's data
// is reproducible from its config alone.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <unordered_map>
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

// Which of train's n rows form the holdout (sorted): the last round(holdout_fraction * n)
// positions of a seeded Fisher-Yates pass from the top over [0, n). Position i of that pass is
// final after its step i, so only the first `want` steps are run, and only the positions they
// touch are held (a map of O(want)), never a permutation of n. Every version so far chose
// these rows, bit for bit. Both parts keep the file's row order.
StatusOr<std::vector<uint64_t>> HoldoutRows(const DataSpec& spec, const std::string& train_name, uint64_t run_seed,
                                            uint64_t n) {
  if (!(spec.holdout_fraction > 0.0 && spec.holdout_fraction < 1.0)) {
    return Status::InvalidArgument("data.holdout_fraction must be in (0, 1)");
  }
  const long long want = std::llround(spec.holdout_fraction * static_cast<double>(n));
  if (want < 1 || static_cast<long long>(n) - want < 2) {
    return Status::InvalidArgument(
        train_name + ": dataset too small for holdout_fraction " +
        std::to_string(spec.holdout_fraction) + " (" + std::to_string(n) + " rows give " +
        std::to_string(want) + " holdout rows; need >= 1 holdout and >= 2 train rows)");
  }
  const uint64_t keep = n - static_cast<uint64_t>(want);
  std::unordered_map<uint64_t, uint64_t> moved;  // position -> row, where not the identity
  auto at = [&](uint64_t p) {
    auto it = moved.find(p);
    return it == moved.end() ? p : it->second;
  };
  SeededRng rng(DataSeed(run_seed, kHoldoutSplitSalt));
  std::vector<uint64_t> rows;
  rows.reserve(static_cast<size_t>(want));
  for (uint64_t i = n - 1; i >= keep; --i) {
    const uint64_t j = rng.Below(i + 1);
    const uint64_t row_i = at(i), row_j = at(j);
    moved[j] = row_i;
    moved.erase(i);
    rows.push_back(row_j);  // position i now holds row_j, for good
  }
  std::sort(rows.begin(), rows.end());
  return rows;
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

// The files of a csv or npy source: train (streamed), pool and holdout (loaded whole).
struct SourceFiles {
  std::unique_ptr<RowReader> train;
  std::string train_name;
  std::function<StatusOr<Table>()> load_pool, load_holdout;  // unset: none given
  std::string pool_name, holdout_name;
};

StatusOr<SourceFiles> CsvFiles(const DataSpec& spec) {
  if (spec.train_path.empty()) return Status::InvalidArgument("data.train_path is required");
  SourceFiles f;
  auto train = OpenCsv(spec.train_path, spec.feature_columns, spec.target_column);
  if (!train.ok()) return train.status();
  f.train = std::move(*train);
  f.train_name = spec.train_path;
  auto loader = [&spec](const std::string& path) {
    return [&spec, path] { return LoadCsv(path, spec.feature_columns, spec.target_column); };
  };
  if (!spec.pool_path.empty()) f.load_pool = loader(spec.pool_path), f.pool_name = spec.pool_path;
  if (!spec.holdout_path.empty()) f.load_holdout = loader(spec.holdout_path), f.holdout_name = spec.holdout_path;
  return f;
}

StatusOr<SourceFiles> NpyFiles(const DataSpec& spec) {
  StatusOr<NpyPaths> train_paths = ResolveNpyPaths(spec.x_path, spec.y_path, spec.train_path,
                                                   "train (x_path/y_path)");
  if (!train_paths.ok()) return train_paths.status();
  if (train_paths->empty()) {
    return Status::InvalidArgument("data.x_path and data.y_path are required");
  }
  StatusOr<NpyPaths> pool_paths = ResolveNpyPaths(spec.pool_x_path, spec.pool_y_path,
                                                  spec.pool_path, "pool (pool_x_path/pool_y_path)");
  if (!pool_paths.ok()) return pool_paths.status();
  SourceFiles f;
  auto train = OpenNpyPair(train_paths->x, train_paths->y);
  if (!train.ok()) return train.status();
  f.train = std::move(*train);
  f.train_name = train_paths->name();
  auto loader = [](const NpyPaths& p) { return [p] { return LoadNpyPair(p.x, p.y); }; };
  if (!pool_paths->empty()) f.load_pool = loader(*pool_paths), f.pool_name = pool_paths->name();
  if (!spec.holdout_path.empty()) {
    const NpyPaths holdout{spec.holdout_path + ".x.npy", spec.holdout_path + ".y.npy"};
    f.load_holdout = loader(holdout);
    f.holdout_name = holdout.name();
  }
  return f;
}

// Streams f.train to train_chunk (less the holdout rows when no holdout file is given).
StatusOr<RunData> StreamFiles(const DataSpec& spec, uint64_t run_seed, SourceFiles f, size_t chunk_bytes,
                              const std::function<Status(const Table&)>& train_chunk, uint64_t* train_rows) {
  RunData d;
  d.train = f.train->columns();
  const size_t row_bytes = sizeof(float) * (static_cast<size_t>(d.train.features) + 1);
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
  std::vector<uint64_t> held;  // train rows that go to the holdout
  if (f.load_holdout) {
    if (Status s = load(f.load_holdout, f.holdout_name, &d.holdout); !s.ok()) return s;
  } else {
    auto rows = HoldoutRows(spec, f.train_name, run_seed, f.train->rows());
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
    d.holdout.x.reserve(held.size() * static_cast<size_t>(d.train.features));
    d.holdout.y.reserve(held.size());
  }
  *train_rows = 0;
  uint64_t row = 0;
  auto next_held = held.begin();
  Table chunk, kept = EmptyLike(d.train);
  while (true) {
    Status s = f.train->Next(chunk_rows, &chunk);
    if (!s.ok()) return s;
    if (chunk.rows() == 0) break;
    const Table* out = &chunk;
    if (!held.empty()) {
      kept.x.clear();
      kept.y.clear();
      for (size_t r = 0; r < chunk.rows(); ++r, ++row) {
        const float* x = &chunk.x[r * static_cast<size_t>(chunk.features)];
        if (next_held != held.end() && *next_held == row) {
          d.holdout.AppendRow(x, chunk.y[r]);
          ++next_held;
        } else {
          kept.AppendRow(x, chunk.y[r]);
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

}  // namespace

StatusOr<RunData> StreamRunData(const DataSpec& spec, uint64_t run_seed, size_t chunk_bytes,
                                const std::function<Status(const Table&)>& train_chunk, uint64_t* train_rows) {
  if (spec.source == "synthetic") {
    auto d = SyntheticRunData(spec, run_seed);
    if (!d.ok()) return d.status();
    Status s = train_chunk(d->train);
    if (!s.ok()) return s;
    *train_rows = d->train.rows();
    d->train = EmptyLike(d->train);
    return d;
  }
  StatusOr<SourceFiles> files = Status::InvalidArgument("data.source: unknown source '" + spec.source +
                                                        "' (want synthetic, csv or npy)");
  if (spec.source == "csv") files = CsvFiles(spec);
  if (spec.source == "npy") files = NpyFiles(spec);
  if (!files.ok()) return files.status();
  return StreamFiles(spec, run_seed, std::move(*files), chunk_bytes, train_chunk, train_rows);
}

StatusOr<RunData> LoadRunData(const DataSpec& spec, uint64_t run_seed) {
  Table train;
  uint64_t rows = 0;
  auto add = [&train](const Table& chunk) {
    train.AppendRows(chunk);
    return Status::Ok();
  };
  auto d = StreamRunData(spec, run_seed, size_t{4} << 20, add, &rows);
  if (!d.ok()) return d.status();
  train.features = d->train.features;
  train.feature_names = d->train.feature_names;
  train.target_name = d->train.target_name;
  d->train = std::move(train);
  return d;
}

}  // namespace ens
