// LoadNpyPair: .npy files are written byte by byte here (no numpy), in the layout numpy.save
// uses, so the tests pin the format rather than another implementation.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/data/data_source.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

using testing::TempDir;

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A .npy file: magic, version, little-endian header length, the dict padded with spaces to
// a multiple of 64 bytes and ended by '\n', then `data`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data,
                int major = 1, const std::string& fortran = "False") {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + dict + data;
}

const std::vector<float> kX6 = {1.0f, 2.0f, 3.5f, -4.0f, 5.0f, 6.25f};  // 3 rows x 2

// The error of loading X and y from these file contents; the load must fail.
Status PairError(const std::string& x, const std::string& y, std::string* x_path,
                 std::string* y_path, const TempDir& dir) {
  *x_path = dir.Write("x.npy", x);
  *y_path = dir.Write("y.npy", y);
  StatusOr<Table> t = LoadNpyPair(*x_path, *y_path);
  REQUIRE_FALSE(t.ok());
  return t.status();
}

TEST_CASE("LoadNpyPair reads <f4 X and (rows,) y") {
  TempDir dir;
  const std::string x = dir.Write("x.npy", Npy("<f4", "(3, 2)", Bytes(kX6)));
  const std::string y = dir.Write("y.npy", Npy("<f4", "(3,)", Bytes(std::vector<float>{7, 8, 9})));
  StatusOr<Table> t = LoadNpyPair(x, y);
  REQUIRE(t.ok());
  CHECK(t->features == 2);
  CHECK(t->feature_names == std::vector<std::string>{"x0", "x1"});
  CHECK(t->target_names == std::vector<std::string>{"y"});
  CHECK(t->x == kX6);
  CHECK(t->y == std::vector<float>{7, 8, 9});
}

TEST_CASE("LoadNpyPair converts <f8 and accepts (rows, 1) y and format versions 2 and 3") {
  const int major = GENERATE(1, 2, 3);
  TempDir dir;
  const std::vector<double> xd = {0.1, 0.2, 0.3, 1e10};
  const std::string x = dir.Write("x.npy", Npy("<f8", "(2, 2)", Bytes(xd), major));
  const std::string y =
      dir.Write("y.npy", Npy("<f8", "(2, 1)", Bytes(std::vector<double>{-1.5, 2.5}), major));
  StatusOr<Table> t = LoadNpyPair(x, y);
  REQUIRE(t.ok());
  CHECK(t->features == 2);
  CHECK(t->x == std::vector<float>{0.1f, 0.2f, 0.3f, 1e10f});
  CHECK(t->y == std::vector<float>{-1.5f, 2.5f});
}

TEST_CASE("LoadNpyPair rejects a bad magic, naming the file") {
  TempDir dir;
  std::string xp, yp;
  std::string bad = Npy("<f4", "(3, 2)", Bytes(kX6));
  bad[1] = 'X';
  Status s = PairError(bad, Npy("<f4", "(3,)", Bytes(std::vector<float>{1, 2, 3})), &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": not a .npy file (bad magic)"));
}

TEST_CASE("LoadNpyPair rejects fortran order, other dtypes and big-endian data") {
  TempDir dir;
  std::string xp, yp;
  const std::string y = Npy("<f4", "(3,)", Bytes(std::vector<float>{1, 2, 3}));
  Status s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6), 1, "True"), y, &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": fortran_order"));
  s = PairError(Npy("<i8", "(3, 2)", Bytes(std::vector<int64_t>{1, 2, 3, 4, 5, 6})), y, &xp, &yp,
                dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": unsupported dtype '<i8'"));
  s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6)), Npy(">f4", "(3,)", std::string(12, '\0')), &xp,
                &yp, dir);
  CHECK_THAT(s.message(), StartsWith(yp + ": unsupported dtype '>f4'"));
}

TEST_CASE("LoadNpyPair rejects truncated files and trailing bytes") {
  TempDir dir;
  std::string xp, yp;
  const std::string y = Npy("<f4", "(3,)", Bytes(std::vector<float>{1, 2, 3}));
  std::string x = Npy("<f4", "(3, 2)", Bytes(kX6));
  x.resize(x.size() - 4);
  Status s = PairError(x, y, &xp, &yp, dir);
  CHECK(s.code() == Status::Code::kCorruption);
  CHECK_THAT(s.message(), StartsWith(xp + ": truncated: shape (3, 2) needs 24 data bytes"));
  s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6)) + "extra", y, &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": trailing bytes: shape (3, 2) needs 24 data bytes"));
  s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6)).substr(0, 30), y, &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": truncated .npy header"));
}

TEST_CASE("LoadNpyPair reads a y of several columns as that many targets, row-major") {
  TempDir dir;
  const std::string x = dir.Write("x.npy", Npy("<f4", "(3, 2)", Bytes(kX6)));
  const std::string y = dir.Write("y.npy", Npy("<f8", "(3, 2)", Bytes(std::vector<double>{1, 2, 3, 4, 5, 6})));
  StatusOr<Table> t = LoadNpyPair(x, y);
  REQUIRE(t.ok());
  CHECK(t->rows() == 3);
  CHECK(t->targets == 2);
  CHECK(t->target_names == std::vector<std::string>{"y0", "y1"});
  CHECK(t->y == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(t->x == kX6);
}

TEST_CASE("LoadNpyPair rejects shape mismatches between X and y") {
  TempDir dir;
  std::string xp, yp;
  const std::string x = Npy("<f4", "(3, 2)", Bytes(kX6));
  Status s = PairError(x, Npy("<f4", "(2,)", Bytes(std::vector<float>{1, 2})), &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(yp + ": y must have shape (3,) or (3, targets) with 1 <= targets <= 1024"));
  CHECK_THAT(s.message(), Contains("found (2,)"));
  s = PairError(x, Npy("<f4", "(3, 2, 1)", Bytes(kX6)), &xp, &yp, dir);
  CHECK_THAT(s.message(), Contains("found (3, 2, 1)"));
  s = PairError(x, Npy("<f4", "(3, 0)", ""), &xp, &yp, dir);
  CHECK_THAT(s.message(), Contains("found (3, 0)"));
  s = PairError(Npy("<f4", "(6,)", Bytes(kX6)), x, &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": X must have shape (rows, features)"));
}

TEST_CASE("LoadNpyPair rejects NaN and Inf, naming element and row") {
  TempDir dir;
  std::string xp, yp;
  std::vector<float> x = kX6;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  const std::string y = Npy("<f4", "(3,)", Bytes(std::vector<float>{1, 2, 3}));
  Status s = PairError(Npy("<f4", "(3, 2)", Bytes(x)), y, &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(xp + ": non-finite value at element 3 (row 1, column 1)"));
  const std::vector<double> yd = {1.0, 2.0, std::numeric_limits<double>::infinity()};
  s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6)), Npy("<f8", "(3,)", Bytes(yd)), &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(yp + ": non-finite value at element 2 (row 2)"));
  const std::vector<double> big = {1.0, 1e300, 3.0};
  s = PairError(Npy("<f4", "(3, 2)", Bytes(kX6)), Npy("<f8", "(3,)", Bytes(big)), &xp, &yp, dir);
  CHECK_THAT(s.message(), StartsWith(yp + ": value out of float32 range at element 1"));
}

TEST_CASE("LoadNpyPair names the path of a missing file") {
  TempDir dir;
  const std::string x = dir.Write("x.npy", Npy("<f4", "(3, 2)", Bytes(kX6)));
  const std::string y = x + ".absent";
  StatusOr<Table> t = LoadNpyPair(x, y);
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Status::Code::kNotFound);
  CHECK_THAT(t.status().message(), StartsWith(y + ": "));
}

}  // namespace
}  // namespace ens
