// Table: rows of float32 features and `targets` float32 targets, held in process memory.
// Regression may have several targets (data.target_columns; an npy y of shape (rows, T));
// classification has one, the row's class index (class_list.h).
//
// The supervisor loads data sources into Tables and publishes them to shared memory
// (dataset_segment.h). Row-major: x[r * features + c], y[r * targets + t]. Every value is
// finite (loaders reject NaN/Inf, naming the place). Plain data. Thread-compatible.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ens {

// The most regression targets a table may have (a y file's columns, data.target_columns).
inline constexpr int kMaxTargets = 1024;

struct Table {
  int features = 0;
  int targets = 1;                         // >= 1
  std::vector<std::string> feature_names;  // size == features (may be synthetic "x0".."x9")
  std::vector<std::string> target_names{"y"};  // size == targets (npy: "y", or "y0".."y<T-1>")
  std::vector<float> x;                    // rows() * features
  std::vector<float> y;                    // rows() * targets

  size_t rows() const { return y.size() / static_cast<size_t>(targets); }
  // REQUIRES: row holds `features` values, target `targets`. Appends one row.
  void AppendRow(const float* row, const float* target) {
    x.insert(x.end(), row, row + features);
    y.insert(y.end(), target, target + targets);
  }
  // REQUIRES: targets == 1.
  void AppendRow(const float* row, float target) { AppendRow(row, &target); }
  const float* TargetsOf(size_t r) const { return &y[r * static_cast<size_t>(targets)]; }
  // REQUIRES: rows.features == features, rows.targets == targets. Appends all of rows.
  void AppendRows(const Table& rows) {
    x.insert(x.end(), rows.x.begin(), rows.x.end());
    y.insert(y.end(), rows.y.begin(), rows.y.end());
  }
};

// The three tables of a run: what members train on (grows by mutation), the fixed
// holdout the ensemble is scored on, and the candidate pool mutation draws from.
struct RunData {
  Table train;
  Table holdout;
  Table pool;
  std::vector<std::string> classes;  // classification: the run's class labels (class_list.h); else empty
};

}  // namespace ens
