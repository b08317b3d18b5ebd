// LoadRunData: synthetic table sizes and seeds, the seeded holdout split of csv/npy train
// data, and the pool/train column agreement.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/data/data_source.h"
#include "common/base/seed.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using Catch::Matchers::Contains;

using testing::TempDir;

// A version 1.0 <f4 .npy file of `values` with the given shape text.
std::string NpyF4(const std::string& shape, const std::vector<float>& values) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  std::string data(values.size() * sizeof(float), '\0');
  std::memcpy(data.data(), values.data(), data.size());
  return out + dict + data;
}

// "a,b,y" rows with y = row index, a = 10 * row, b = -row: any row identifies itself.
std::string NumberedCsv(int rows, const std::string& header = "a,b,y") {
  std::string s = header + "\n";
  for (int r = 0; r < rows; ++r) {
    s += std::to_string(10 * r) + "," + std::to_string(-r) + "," + std::to_string(r) + "\n";
  }
  return s;
}

DataSpec CsvSpec(const std::string& train_path) {
  DataSpec spec;
  spec.source = DataSource::kCsv;
  spec.train_path = train_path;
  spec.target_columns = {"y"};
  return spec;
}

TEST_CASE("LoadRunData synthetic: sizes from the spec, distinct seeded tables") {
  DataSpec spec;
  spec.synthetic_features = 7;
  spec.initial_rows = 50;
  spec.holdout_rows = 30;
  spec.pool_rows = 20;
  StatusOr<RunData> d = LoadRunData(spec, 5);
  REQUIRE(d.ok());
  CHECK(d->train.rows() == 50);
  CHECK(d->holdout.rows() == 30);
  CHECK(d->pool.rows() == 20);
  CHECK(d->train.features == 7);
  CHECK(d->pool.features == 7);
  CHECK(d->holdout.feature_names == d->train.feature_names);
  // Each table has its own stream: their first rows differ.
  CHECK(d->train.x[0] != d->holdout.x[0]);
  CHECK(d->train.x[0] != d->pool.x[0]);
  CHECK(d->holdout.x[0] != d->pool.x[0]);

  StatusOr<RunData> again = LoadRunData(spec, 5);
  REQUIRE(again.ok());
  CHECK(again->train.x == d->train.x);
  CHECK(again->pool.y == d->pool.y);
  StatusOr<RunData> other = LoadRunData(spec, 6);
  REQUIRE(other.ok());
  CHECK(other->train.x != d->train.x);
}

TEST_CASE("the synthetic reader gives each table its seed's rows, train in chunks of any size") {
  DataSpec spec;
  spec.synthetic_features = 6;
  spec.initial_rows = 23;
  spec.holdout_rows = 9;
  spec.pool_rows = 4;
  const double noise = spec.synthetic_noise;
  // DataSeed's salts (data_source.h): 1 train, 2 holdout, 3 pool.
  const Table train = GenerateFriedman1(23, 6, noise, DataSeed(8, 1));
  Table streamed;
  uint64_t rows = 0;
  auto add = [&streamed](const Table& chunk) {
    streamed.AppendRows(chunk);
    return Status::Ok();
  };
  StatusOr<RunData> d = StreamRunData(spec, 8, 5 * 7 * sizeof(float), add, &rows);  // 5 rows a chunk
  REQUIRE(d.ok());
  CHECK(rows == 23);
  CHECK(streamed.x == train.x);
  CHECK(streamed.y == train.y);
  CHECK(d->train.rows() == 0);
  CHECK(d->train.feature_names == train.feature_names);
  CHECK(d->holdout.x == GenerateFriedman1(9, 6, noise, DataSeed(8, 2)).x);
  CHECK(d->pool.y == GenerateFriedman1(4, 6, noise, DataSeed(8, 3)).y);

  StatusOr<DataFiles> files = OpenDataFiles(spec, 8, nullptr, nullptr);
  REQUIRE(files.ok());
  CHECK(files->train->rows() == 23);
  CHECK(files->train->columns().features == 6);
  CHECK(files->train->columns().rows() == 0);
}

TEST_CASE("LoadRunData synthetic: an empty pool keeps the columns") {
  DataSpec spec;
  spec.pool_rows = 0;
  StatusOr<RunData> d = LoadRunData(spec, 1);
  REQUIRE(d.ok());
  CHECK(d->pool.rows() == 0);
  CHECK(d->pool.features == 10);
  CHECK(d->pool.feature_names.size() == 10);
}

// The y values (row ids) of a table, sorted.
std::vector<float> Ids(const Table& t) {
  std::vector<float> ids = t.y;
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST_CASE("LoadRunData csv: seeded holdout split of train") {
  TempDir dir;
  DataSpec spec = CsvSpec(dir.Write("train.csv", NumberedCsv(20)));
  spec.holdout_fraction = 0.3;
  StatusOr<RunData> d = LoadRunData(spec, 9);
  REQUIRE(d.ok());
  CHECK(d->train.rows() == 14);
  CHECK(d->holdout.rows() == 6);
  CHECK(d->pool.rows() == 0);
  CHECK(d->pool.feature_names == d->train.feature_names);
  // Rows move whole, and every row lands in exactly one table.
  for (size_t r = 0; r < d->holdout.rows(); ++r) {
    CHECK(d->holdout.x[2 * r] == 10 * d->holdout.y[r]);
    CHECK(d->holdout.x[2 * r + 1] == -d->holdout.y[r]);
  }
  std::vector<float> all = Ids(d->train);
  const std::vector<float> held = Ids(d->holdout);
  all.insert(all.end(), held.begin(), held.end());
  std::sort(all.begin(), all.end());
  for (int r = 0; r < 20; ++r) CHECK(all[r] == static_cast<float>(r));
  // Not simply the last rows of the file.
  CHECK(held != std::vector<float>{14, 15, 16, 17, 18, 19});

  StatusOr<RunData> again = LoadRunData(spec, 9);
  REQUIRE(again.ok());
  CHECK(Ids(again->holdout) == held);
  StatusOr<RunData> other = LoadRunData(spec, 10);
  REQUIRE(other.ok());
  CHECK(Ids(other->holdout) != held);
}

TEST_CASE("StreamRunData hands train over in chunks, with LoadRunData's rows and the earlier holdout choice") {
  TempDir dir;
  DataSpec spec = CsvSpec(dir.Write("train.csv", NumberedCsv(1000)));
  spec.holdout_fraction = 0.1;
  std::vector<float> streamed;
  size_t chunks = 0;
  uint64_t rows = 0;
  auto take = [&](const Table& chunk) {
    ++chunks;
    CHECK(chunk.rows() <= 3);  // 40 B at 12 B a row (2 features + target)
    streamed.insert(streamed.end(), chunk.y.begin(), chunk.y.end());
    return Status::Ok();
  };
  StatusOr<RunData> s = StreamRunData(spec, 9, 40, take, &rows);
  REQUIRE(s.ok());
  CHECK(s->train.rows() == 0);
  CHECK(s->train.features == 2);
  CHECK(rows == 900);
  CHECK(streamed.size() == 900);
  CHECK(chunks >= 300);
  StatusOr<RunData> whole = LoadRunData(spec, 9);
  REQUIRE(whole.ok());
  CHECK(Ids(whole->train) == streamed);
  CHECK(Ids(whole->holdout) == Ids(s->holdout));
  // The holdout is the last 10% of a full seeded Fisher-Yates pass, as every version chose it.
  std::vector<uint64_t> order(1000);
  for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
  const uint64_t base = StreamSeed(SplitMix64(9), SeedStream::kData);
  SeededRng rng(SplitMix64(base ^ 4));  // kHoldoutSplitSalt
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.Below(i + 1)]);
  std::vector<float> expected(order.begin() + 900, order.end());
  std::sort(expected.begin(), expected.end());
  CHECK(Ids(s->holdout) == expected);
  // A failing sink stops the stream with its error.
  auto refuse = [](const Table&) { return Status::IOError("disk full (test)"); };
  StatusOr<RunData> bad = StreamRunData(spec, 9, 40, refuse, &rows);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Contains("disk full (test)"));
}

TEST_CASE("LoadRunData csv: explicit holdout and pool files") {
  TempDir dir;
  DataSpec spec = CsvSpec(dir.Write("train.csv", NumberedCsv(5)));
  spec.holdout_path = dir.Write("holdout.csv", NumberedCsv(3));
  spec.pool_path = dir.Write("pool.csv", NumberedCsv(4));
  StatusOr<RunData> d = LoadRunData(spec, 1);
  REQUIRE(d.ok());
  CHECK(d->train.rows() == 5);
  CHECK(d->holdout.rows() == 3);
  CHECK(d->pool.rows() == 4);
}

TEST_CASE("LoadRunData csv: a pool with other columns names both files and the column") {
  TempDir dir;
  DataSpec spec = CsvSpec(dir.Write("train.csv", NumberedCsv(10)));
  spec.pool_path = dir.Write("pool.csv", NumberedCsv(4, "a,c,y"));
  StatusOr<RunData> d = LoadRunData(spec, 1);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == Status::Code::kInvalidArgument);
  const std::string& m = d.status().message();
  CHECK_THAT(m, Contains(spec.pool_path));
  CHECK_THAT(m, Contains(spec.train_path));
  CHECK_THAT(m, Contains("'c'"));
  CHECK_THAT(m, Contains("'b'"));
}

TEST_CASE("LoadRunData csv: too few rows for the holdout fraction") {
  TempDir dir;
  // 2 rows * 0.2 rounds to no holdout row; 3 rows * 0.5 leaves a single train row.
  const int rows = GENERATE(2, 3);
  DataSpec spec = CsvSpec(dir.Write("train.csv", NumberedCsv(rows)));
  spec.holdout_fraction = rows == 2 ? 0.2 : 0.5;
  StatusOr<RunData> d = LoadRunData(spec, 1);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Contains("dataset too small for holdout_fraction"));
  CHECK_THAT(d.status().message(), Contains(spec.train_path));
  // The smallest dataset that works: 3 rows at 0.34 -> 1 holdout, 2 train.
  spec.train_path = dir.Write("ok.csv", NumberedCsv(3));
  spec.holdout_fraction = 0.34;
  StatusOr<RunData> ok = LoadRunData(spec, 1);
  REQUIRE(ok.ok());
  CHECK(ok->train.rows() == 2);
  CHECK(ok->holdout.rows() == 1);
}

TEST_CASE("LoadRunData csv: loader errors pass through") {
  TempDir dir;
  DataSpec spec = CsvSpec(dir.Write("train.csv", "a,y\n1,2\n2,3\n3,4\n4,5\n1,nan\n5,6\n"));
  StatusOr<RunData> d = LoadRunData(spec, 1);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Contains(spec.train_path + ":6:2:"));
  // Also in a file too small for the holdout: the bad value is named, not the size.
  DataSpec tiny = CsvSpec(dir.Write("tiny.csv", "a,y\n1,nan\n"));
  StatusOr<RunData> t = LoadRunData(tiny, 1);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.status().message(), Contains(tiny.train_path + ":2:2:"));
}

TEST_CASE("LoadRunData npy: holdout split and pool feature-count check") {
  TempDir dir;
  std::vector<float> x(10 * 3), y(10);
  for (int r = 0; r < 10; ++r) {
    y[r] = static_cast<float>(r);
    for (int c = 0; c < 3; ++c) x[r * 3 + c] = static_cast<float>(r * 3 + c);
  }
  DataSpec spec;
  spec.source = DataSource::kNpy;
  spec.x_path = dir.Write("x.npy", NpyF4("(10, 3)", x));
  spec.y_path = dir.Write("y.npy", NpyF4("(10,)", y));
  spec.holdout_fraction = 0.2;
  StatusOr<RunData> d = LoadRunData(spec, 4);
  REQUIRE(d.ok());
  CHECK(d->train.rows() == 8);
  CHECK(d->holdout.rows() == 2);
  CHECK(d->pool.features == 3);

  spec.pool_x_path = dir.Write("px.npy", NpyF4("(2, 2)", {1, 2, 3, 4}));
  spec.pool_y_path = dir.Write("py.npy", NpyF4("(2,)", {1, 2}));
  StatusOr<RunData> bad = LoadRunData(spec, 4);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Contains(spec.pool_x_path));
  CHECK_THAT(bad.status().message(), Contains("2 feature columns"));

  spec.pool_y_path.clear();
  StatusOr<RunData> half = LoadRunData(spec, 4);
  REQUIRE_FALSE(half.ok());
  CHECK_THAT(half.status().message(), Contains("pool"));
}

// An unknown source is the config's error (config_test); the data layer refuses what the
// synthetic data cannot be.
TEST_CASE("LoadRunData refuses classification on the synthetic data") {
  DataSpec spec;
  StatusOr<RunData> d = LoadRunData(spec, 1, TaskKind::kClassification);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Contains("the synthetic data is a regression target"));
}

}  // namespace
}  // namespace ens
