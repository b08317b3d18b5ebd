// Data sources: the built-in synthetic generator and the CSV / NPY loaders, and the one
// interface a run's data is read through (OpenDataFiles: a source's reader, picked by
// data.source from data_format.cpp's table).
//
// Every loader returns a Status naming the place of the first problem: the path for a
// missing/unreadable file; "file:line:column" for CSV (line 1 is the header, columns
// 1-based); "file: ..." with the element index for NPY. NaN and Inf are rejected.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/base/status.h"
#include "common/base/table.h"

namespace ens {

class LabelMap;  // common/config/class_list.h

// Friedman #1: y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + noise * N(0,1),
// x ~ U[0,1]^features (features >= 5; the rest are distractors). Deterministic in seed:
// the same (rows, features, noise, seed) give the same bits on every machine
// (own splitmix64-based generator, no std:: distributions).
Table GenerateFriedman1(int rows, int features, double noise, uint64_t seed);
// The noiseless target for one row (used to label pool rows when needed).
float Friedman1Target(const float* row);

// A training file read a chunk of rows at a time, so a table of any size is never held whole
// (the supervisor streams it into the shared segment). rows() is known once open: from the
// header of an npy file; from a first pass over a CSV file that counts its non-empty lines.
// Errors name the place as the loaders below do. Not thread-safe.
class RowReader {
 public:
  virtual ~RowReader() = default;
  // The file's columns (features, targets, feature_names, target_names) and no rows.
  virtual const Table& columns() const = 0;
  virtual uint64_t rows() const = 0;
  // The next at most max_rows rows, in file order, into *chunk (replacing its rows); no rows
  // once all are read. REQUIRES: max_rows >= 1.
  virtual Status Next(size_t max_rows, Table* chunk) = 0;
};

// Every remaining row of `reader` in one Table with its columns.
StatusOr<Table> ReadAllRows(RowReader& reader);

// CSV with a header line. `feature_columns` empty = every column except the targets.
// Separator ','; surrounding spaces are trimmed; empty lines are skipped.
// `target_columns`: one column, or several (regression: the table's targets, in that order).
// No target (with `feature_columns` given): rows without a target, y = 0 (prediction input).
// `labels` (classification): the one target is a label, stored as labels maps it; else numbers.
StatusOr<Table> LoadCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                        const std::vector<std::string>& target_columns, LabelMap* labels = nullptr);
StatusOr<std::unique_ptr<RowReader>> OpenCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                                             const std::vector<std::string>& target_columns, LabelMap* labels = nullptr);
// The same with one target column ("" = none).
StatusOr<Table> LoadCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                        const std::string& target_column, LabelMap* labels = nullptr);
StatusOr<std::unique_ptr<RowReader>> OpenCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                                             const std::string& target_column, LabelMap* labels = nullptr);

// A pair of .npy files: X of shape (rows, features) and y of shape (rows,) or (rows, T) (T
// targets, named y0..y<T-1>; (rows,) and (rows, 1) are one target named y); dtype <f4 or
// <f8, C order (numpy's default save format, versions 1.0–3.0).
// `labels` (classification): y holds integer labels, of an integer dtype (i1..i8, u1..u8) or a
// float dtype with whole values; a fractional value is an error naming the element; y must
// be one column.
StatusOr<Table> LoadNpyPair(const std::string& x_path, const std::string& y_path, LabelMap* labels = nullptr);
StatusOr<std::unique_ptr<RowReader>> OpenNpyPair(const std::string& x_path, const std::string& y_path,
                                                 LabelMap* labels = nullptr);
// One column of `rows` values: shape (rows,) or (rows, 1), <f4 or <f8, every value finite.
// A wrong shape or a NaN is an error naming the file (and the row).
StatusOr<std::vector<float>> LoadNpyColumn(const std::string& path, uint64_t rows);

// A run's tables as its data source gives them: train streamed, the pool and holdout loaded
// whole. Every reader of a run's data goes through it (LoadRunData and StreamRunData below,
// ensemblectl's data columns).
struct DataFiles {
  std::unique_ptr<RowReader> train;
  std::string train_name;  // the file(s), as errors name them
  // Unset: none given (no pool; the holdout is taken from train by holdout_fraction).
  std::function<StatusOr<Table>()> load_pool, load_holdout;
  std::string pool_name, holdout_name;
};

// A data source's reader: the files spec names (or the rows it generates from run_seed).
// `train_labels` maps train's targets, `labels` the pool's and holdout's (classification: the
// class list, or a collector of labels); both null: the targets are numbers. Errors name the
// file and place as the loaders above do, or the "data" key at fault.
// One a source: Open<Name>Files in common/data/<name>_reader.cpp, listed in data_format.cpp.
using DataFilesReader = StatusOr<DataFiles> (*)(const DataSpec& spec, uint64_t run_seed, LabelMap* train_labels,
                                                LabelMap* labels);

// The files of spec's source, through its reader.
StatusOr<DataFiles> OpenDataFiles(const DataSpec& spec, uint64_t run_seed, LabelMap* train_labels, LabelMap* labels);

// The seed of the run's data generator `salt`. Salts (part of the reproducibility contract;
// never renumbered): 1 train, 2 holdout, 3 pool (synthetic_reader.cpp), 4 the holdout split
// (run_data.cpp).
uint64_t DataSeed(uint64_t run_seed, uint64_t salt);

// Builds train/holdout/pool for a run from config.data:
// synthetic: train = initial_rows, holdout = holdout_rows, pool = pool_rows, each from a
//   distinct seed derived from run_seed;
// csv/npy: train from the file(s); holdout from holdout_path or the last holdout_fraction of
//   train after a seeded shuffle; pool from pool_path (may be empty). The pool must have the
//   same feature columns as train, else an error naming both.
// Classification (task): the class list is every distinct label of the train, holdout and
// pool files (a first pass over them: class_list.h), returned in RunData::classes; the
// holdout taken from train is stratified: round(holdout_fraction * n_c) rows of each class c.
StatusOr<RunData> LoadRunData(const DataSpec& spec, uint64_t run_seed, TaskKind task = TaskKind::kRegression);

// LoadRunData with train's rows handed to train_chunk in chunks of about chunk_bytes, in file
// order, never held whole (the supervisor writes them straight into the shared segment). The
// RunData returned has train's columns and no train rows; *train_rows counts those handed
// over. Peak memory: holdout + pool + two chunks (+ O(holdout rows) while choosing them).
StatusOr<RunData> StreamRunData(const DataSpec& spec, uint64_t run_seed, size_t chunk_bytes,
                                const std::function<Status(const Table&)>& train_chunk, uint64_t* train_rows,
                                TaskKind task = TaskKind::kRegression);

}  // namespace ens
