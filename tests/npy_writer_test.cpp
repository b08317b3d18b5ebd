// NpyWriter: what it writes reads back through the .npy loader (data_source.h), headers are
// padded as numpy pads them, and a writer is strict about the rows it declared.
#include "common/data/npy_writer.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"
#include "common/data/data_source.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;

TEST_CASE("a written float32 array reads back bit for bit, 2-D and 1-D") {
  TempDir d;
  const std::vector<float> x = {1.5f, -2.25f, 3e-8f, 4e30f, 0.0f, -0.0f};  // 3 rows x 2
  REQUIRE(WriteNpyFloat32(d.File("x.npy"), x.data(), 3, 2, 2).ok());
  const std::vector<float> y = {7.0f, 8.5f, -9.0f};
  REQUIRE(WriteNpyFloat32(d.File("y.npy"), y.data(), 3, 0, 1).ok());
  auto t = LoadNpyPair(d.File("x.npy"), d.File("y.npy"));
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  CHECK(t->x == x);
  CHECK(t->y == y);
  auto col = LoadNpyColumn(d.File("y.npy"), 3);
  REQUIRE(col.ok());
  CHECK(*col == y);
  // A stride wider than the row: every other column of a [3, 2] table.
  REQUIRE(WriteNpyFloat32(d.File("c.npy"), x.data() + 1, 3, 0, 2).ok());
  auto second = LoadNpyColumn(d.File("c.npy"), 3);
  REQUIRE(second.ok());
  CHECK(*second == std::vector<float>{-2.25f, 4e30f, -0.0f});
}

TEST_CASE("headers are numpy's: version 1.0, the shape tuple, padded to 64 bytes") {
  for (const auto& [shape, text] : std::vector<std::pair<std::vector<uint64_t>, std::string>>{
           {{5}, "'shape': (5,), }"}, {{5, 3}, "'shape': (5, 3), }"}, {{0}, "'shape': (0,), }"}}) {
    const std::string h = NpyHeader("<f4", shape);
    CHECK(h.size() % 64 == 0);
    CHECK(h.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) == 0);
    CHECK(h.back() == '\n');
    CHECK(h.find(text) != std::string::npos);
    CHECK(static_cast<size_t>(static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8) == h.size() - 10);
  }
  TempDir d;
  REQUIRE(WriteNpyInt64(d.File("ids.npy"), {3, -1, 1LL << 40}).ok());
  auto bytes = ReadFile(d.File("ids.npy"));
  REQUIRE(bytes.ok());
  CHECK(bytes->find("'descr': '<i8'") != std::string::npos);
  CHECK(bytes->size() == NpyHeader("<i8", {3}).size() + 24);
}

TEST_CASE("a writer refuses rows beyond its shape and a finish short of it") {
  TempDir d;
  auto w = NpyWriter::Create(d.File("a.npy"), {2, 2});
  REQUIRE(w.ok());
  const float row[2] = {1, 2};
  REQUIRE(w->AppendRow(row).ok());
  Status short_finish = w->Finish();
  CHECK_FALSE(short_finish.ok());
  CHECK(short_finish.message().find("1 rows written of 2") != std::string::npos);
  auto w2 = NpyWriter::Create(d.File("b.npy"), {1});
  REQUIRE(w2.ok());
  REQUIRE(w2->AppendRow(row).ok());
  CHECK_FALSE(w2->AppendRow(row).ok());
  CHECK(w2->Finish().ok());
  CHECK_FALSE(NpyWriter::Create(d.File("no/such/dir/c.npy"), {1}).ok());
}

TEST_CASE("LoadNpyColumn names the file, the shape it found and a non-finite row") {
  TempDir d;
  const std::vector<float> v = {1, 2, std::numeric_limits<float>::quiet_NaN()};
  REQUIRE(WriteNpyFloat32(d.File("v.npy"), v.data(), 3, 1, 1).ok());
  auto wrong = LoadNpyColumn(d.File("v.npy"), 4);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message() == d.File("v.npy") + ": shape (3, 1), expected (4,) or (4, 1)");
  auto nan = LoadNpyColumn(d.File("v.npy"), 3);
  REQUIRE_FALSE(nan.ok());
  CHECK(nan.status().message().find("non-finite value at element 2 (row 2, column 0)") != std::string::npos);
  auto missing = LoadNpyColumn(d.File("none.npy"), 3);
  CHECK(missing.status().code() == Status::Code::kNotFound);
}

}  // namespace
}  // namespace ens
