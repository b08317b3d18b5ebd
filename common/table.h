// Table: rows of float32 features and one float32 target, held in process memory.
// Classification: the target is the row's class index (class_list.h).
//
// The supervisor loads data sources into Tables and publishes them to shared memory
// (dataset_segment.h). Row-major: x[r * features + c]. Every value is finite (loaders
// reject NaN/Inf, naming the place). Plain data. Thread-compatible.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ens {

struct Table {
  int features = 0;
  std::vector<std::string> feature_names;  // size == features (may be synthetic "x0".."x9")
  std::string target_name = "y";
  std::vector<float> x;                    // rows() * features
  std::vector<float> y;                    // rows()

  size_t rows() const { return y.size(); }
  // REQUIRES: row.size() == features. Appends one row.
  void AppendRow(const float* row, float target) {
    x.insert(x.end(), row, row + features);
    y.push_back(target);
  }
  // REQUIRES: rows.features == features. Appends all of rows.
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
