// Tests of common/dataset_segment: writer/reader round trips, appends, growth, rollback, and
// every kind of damage the reader must refuse (written byte by byte with pwrite).
#include "common/state/dataset_segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process_harness.h"

namespace ens {
namespace {

using ens::testing::TempDir;  // tests/support/process_harness.h

// rows x features table; value of (r, c) = r * 10 + c + offset, target = -(r + offset).
Table MakeTable(int rows, int features, float offset = 0) {
  Table t;
  t.features = features;
  std::vector<float> row(features);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < features; ++c) row[c] = static_cast<float>(r * 10 + c) + offset;
    t.AppendRow(row.data(), -(static_cast<float>(r) + offset));
  }
  return t;
}

std::unique_ptr<DatasetWriter> MustCreate(const std::string& path, const Table& t, uint64_t gen) {
  auto w = DatasetWriter::Create(path, t, gen);
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  return std::move(w.value());
}

std::unique_ptr<DatasetView> MustMap(const std::string& path) {
  auto v = DatasetView::Map(path);
  INFO(v.status().ToString());
  REQUIRE(v.ok());
  return std::move(v.value());
}

// Checks that view rows [begin, begin + t.rows()) hold t.
void CheckRows(const DatasetView& v, uint64_t begin, const Table& t) {
  for (size_t r = 0; r < t.rows(); ++r) {
    const float* row = v.data() + (begin + r) * v.stride();
    for (int c = 0; c < t.features; ++c) {
      INFO("row " << begin + r << " col " << c);
      REQUIRE(row[c] == t.x[r * t.features + c]);
    }
    REQUIRE(row[t.features] == t.y[r]);
  }
}

void Pwrite(const std::string& path, const void* bytes, size_t n, off_t off) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes, n, off) == static_cast<ssize_t>(n));
  ::close(fd);
}

uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

// Requires Map to fail with a Corruption that names the path and contains `fragment`.
void RequireRefused(const std::string& path, const std::string& fragment) {
  auto v = DatasetView::Map(path);
  REQUIRE_FALSE(v.ok());
  INFO(v.status().ToString());
  CHECK(v.status().code() == Status::Code::kCorruption);
  CHECK_THAT(v.status().message(), Catch::Contains(path));
  CHECK_THAT(v.status().message(), Catch::Contains(fragment));
}

TEST_CASE("Create then Map round-trips every value and fills the header", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table t = MakeTable(37, 3, 0.5f);
  auto w = MustCreate(path, t, 5);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK(w->path() == path);

  auto v = MustMap(path);
  const SegmentHeader& h = v->header();
  CHECK(std::string(h.magic, 8) == "ENSDSET1");
  CHECK(h.layout_version == kSegmentLayoutVersion);
  CHECK(h.dtype == kDtypeFloat32);
  CHECK(h.generation == 5);
  CHECK(h.rows == 37);
  CHECK(h.features == 3);
  CHECK(h.capacity_rows >= 37);
  CHECK(v->stride() == 4);
  CHECK(FileSize(path) == kSegmentHeaderBytes + h.capacity_rows * 4 * sizeof(float));
  // The checksum is FNV-1a over exactly the rows' bytes.
  CHECK(h.checksum == Fnv1a64(v->data(), 37 * 4 * sizeof(float), kFnvOffset));
  CHECK(h.checksum == w->header().checksum);
  CheckRows(*v, 0, t);

  auto back = w->Read(10, 20);
  REQUIRE(back.ok());
  CHECK(back->rows() == 10);
  CHECK(back->x[0] == t.x[10 * 3]);
  CHECK(back->y[9] == t.y[19]);
  CHECK_FALSE(w->Read(20, 38).ok());
}

TEST_CASE("A table of several targets keeps them after its features, in the header's count", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table t;
  t.features = 2;
  t.targets = 3;
  for (int r = 0; r < 5; ++r) {
    const float x[2] = {static_cast<float>(r), r + 0.5f}, y[3] = {-1.0f * r, 10.0f * r, 100.0f + r};
    t.AppendRow(x, y);
  }
  auto w = MustCreate(path, t, 0);
  auto v = MustMap(path);
  CHECK(v->header().targets == 3);
  CHECK(v->targets() == 3);
  CHECK(v->stride() == 5);
  CHECK(v->data()[3 * 5 + 0] == 3.0f);
  CHECK(v->data()[3 * 5 + 2] == -3.0f);
  CHECK(v->data()[3 * 5 + 4] == 103.0f);
  auto back = w->Read(1, 5);
  REQUIRE(back.ok());
  CHECK(back->targets == 3);
  CHECK(back->rows() == 4);
  CHECK(back->y[4] == 20.0f);  // row 2's second target (row 1 of the rows read)
  Table one = MakeTable(2, 2);
  Status wrong = w->Append(one, 1);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.message(), Catch::Contains("1 targets to a segment of 3"));

  // A header written before several targets existed holds 0 there: one target.
  SegmentHeader old = v->header();
  old.targets = 0;
  CHECK(TargetCount(old) == 1);
  CHECK(RowFloats(old) == 3);
}

TEST_CASE("a segment written in chunks appears only at Commit and equals one written whole", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table t = MakeTable(3000, 3, 0.25f);
  auto w = DatasetWriter::Begin(path, 3, 0, 16);  // capacity grows as chunks arrive
  REQUIRE(w.ok());
  for (size_t begin = 0; begin < t.rows(); begin += 700) {
    Table chunk;
    chunk.features = 3;
    for (size_t r = begin; r < std::min(t.rows(), begin + 700); ++r) chunk.AppendRow(&t.x[r * 3], t.y[r]);
    REQUIRE((*w)->AddRows(chunk).ok());
    CHECK_FALSE(std::filesystem::exists(path));  // nothing half-written is ever visible
  }
  REQUIRE((*w)->Commit().ok());
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK((*w)->path() == path);
  auto v = MustMap(path);
  CHECK(v->header().rows == 3000);
  CheckRows(*v, 0, t);
  auto whole = MustCreate(dir.File("whole.bin"), t, 0);
  CHECK(v->header().checksum == whole->header().checksum);
  // The writer goes on as any other: appends publish generations.
  REQUIRE((*w)->Append(MakeTable(5, 3, 9.0f), 1).ok());
  CHECK(MustMap(path)->header().rows == 3005);
}

TEST_CASE("Fnv1a64 matches the published test vectors", "[segment]") {
  CHECK(Fnv1a64("", 0, kFnvOffset) == 0xcbf29ce484222325ULL);
  CHECK(Fnv1a64("a", 1, kFnvOffset) == 0xaf63dc4c8601ec8cULL);
  CHECK(Fnv1a64("foobar", 6, kFnvOffset) == 0x85944171f73967e8ULL);
  // Incremental continuation equals one pass.
  CHECK(Fnv1a64("bar", 3, Fnv1a64("foo", 3, kFnvOffset)) == 0x85944171f73967e8ULL);
}

TEST_CASE("Append grows rows and generation and keeps the checksum valid", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table first = MakeTable(10, 2);
  Table more = MakeTable(4, 2, 1000.0f);
  auto w = MustCreate(path, first, 0);
  REQUIRE(w->Append(more, 1).ok());
  CHECK(w->header().rows == 14);
  CHECK(w->header().generation == 1);

  auto v = MustMap(path);
  CHECK(v->header().rows == 14);
  CHECK(v->header().generation == 1);
  CheckRows(*v, 0, first);
  CheckRows(*v, 10, more);

  SECTION("rows with another feature count are refused, naming the path") {
    Status s = w->Append(MakeTable(1, 3), 2);
    CHECK(s.code() == Status::Code::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(path));
    CHECK(w->header().rows == 14);
  }
  SECTION("a writer reopened for resume continues the same checksum") {
    w.reset();
    auto reopened = DatasetWriter::Open(path);
    REQUIRE(reopened.ok());
    CHECK(reopened.value()->header().rows == 14);
    REQUIRE(reopened.value()->Append(MakeTable(3, 2, 7.0f), 2).ok());
    auto v2 = MustMap(path);
    CHECK(v2->header().rows == 17);
    CHECK(v2->header().generation == 2);
    CheckRows(*v2, 14, MakeTable(3, 2, 7.0f));
  }
}

TEST_CASE("Append beyond capacity grows the file - an older mapping keeps its prefix",
          "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table first = MakeTable(5, 2);
  auto w = MustCreate(path, first, 0);
  const uint64_t cap = w->header().capacity_rows;
  const uint64_t old_size = FileSize(path);

  auto old_view = MustMap(path);  // maps the file at its old size
  Table big = MakeTable(static_cast<int>(cap), 2, 3.0f);  // 5 + cap rows > cap
  REQUIRE(w->Append(big, 1).ok());
  CHECK(w->header().rows == 5 + cap);
  CHECK(w->header().capacity_rows >= 5 + cap);
  CHECK(FileSize(path) > old_size);
  CHECK(FileSize(path) == kSegmentHeaderBytes + w->header().capacity_rows * 3 * sizeof(float));

  // The old reader still sees its generation and bytes, and they still checksum.
  CHECK(old_view->header().rows == 5);
  CHECK(old_view->header().generation == 0);
  CheckRows(*old_view, 0, first);
  CHECK(Fnv1a64(old_view->data(), 5 * 3 * sizeof(float), kFnvOffset) ==
        old_view->header().checksum);

  auto new_view = MustMap(path);
  CheckRows(*new_view, 0, first);
  CheckRows(*new_view, 5, big);
}

TEST_CASE("Mapping a newer generation after an earlier one checks only the appended rows", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  auto w = MustCreate(path, MakeTable(50, 3), 0);
  auto g0 = MustMap(path);
  CHECK(g0->rows_checked() == 50);  // a first mapping checks everything
  REQUIRE(w->Append(MakeTable(7, 3, 100.0f), 1).ok());

  auto g1 = DatasetView::Map(path, g0.get());
  REQUIRE(g1.ok());
  CHECK(g1.value()->rows_checked() == 7);
  CHECK(g1.value()->header().rows == 57);
  CheckRows(*g1.value(), 50, MakeTable(7, 3, 100.0f));

  SECTION("an appended row damaged on disk is still refused") {
    REQUIRE(w->Append(MakeTable(2, 3, 200.0f), 2).ok());
    float junk = 12345.0f;
    Pwrite(path, &junk, sizeof(junk), static_cast<off_t>(kSegmentHeaderBytes + 58 * 4 * sizeof(float)));
    auto g2 = DatasetView::Map(path, g1.value().get());
    REQUIRE_FALSE(g2.ok());
    CHECK(g2.status().code() == Status::Code::kCorruption);
    CHECK_THAT(g2.status().message(), Catch::Contains(path));
  }
  SECTION("rolled back and rewritten below the earlier view: the whole table is checked") {
    REQUIRE(w->Rollback(40, 0).ok());
    REQUIRE(w->Append(MakeTable(20, 3, 300.0f), 1).ok());  // rows 40..59 differ from g1's
    auto g2 = DatasetView::Map(path, g1.value().get());
    INFO(g2.status().ToString());
    REQUIRE(g2.ok());
    CHECK(g2.value()->rows_checked() == 60);
    CheckRows(*g2.value(), 40, MakeTable(20, 3, 300.0f));
  }
  SECTION("a replaced file is checked in full") {
    w.reset();
    auto other = MustCreate(path, MakeTable(60, 3, 9.0f), 0);
    auto g2 = DatasetView::Map(path, g1.value().get());
    REQUIRE(g2.ok());
    CHECK(g2.value()->rows_checked() == 60);
  }
}

TEST_CASE("Rollback restores rows, generation and checksum", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  auto w = MustCreate(path, MakeTable(20, 4), 3);
  const SegmentHeader before = w->header();
  REQUIRE(w->Append(MakeTable(6, 4, 50.0f), 4).ok());
  CHECK(w->header().checksum != before.checksum);

  REQUIRE(w->Rollback(20, 3).ok());
  CHECK(w->header().rows == 20);
  CHECK(w->header().generation == 3);
  CHECK(w->header().checksum == before.checksum);
  auto v = MustMap(path);
  CHECK(v->header().rows == 20);
  CHECK(v->header().generation == 3);
  CHECK(v->header().checksum == before.checksum);
  CheckRows(*v, 0, MakeTable(20, 4));

  // Rolling "forward" past the rows the segment holds is corruption, not a guess.
  Status s = w->Rollback(21, 4);
  CHECK(s.code() == Status::Code::kCorruption);
  CHECK_THAT(s.message(), Catch::Contains(path));
}

TEST_CASE("The reader refuses a damaged segment and names the path", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("train.bin");
  Table t = MakeTable(8, 3);
  auto w = MustCreate(path, t, 1);
  w.reset();
  REQUIRE(DatasetView::Map(path).ok());

  SECTION("bad magic") {
    Pwrite(path, "XXXX", 4, 0);
    RequireRefused(path, "magic");
  }
  SECTION("wrong layout version") {
    uint32_t version = kSegmentLayoutVersion + 1;
    Pwrite(path, &version, sizeof version, offsetof(SegmentHeader, layout_version));
    RequireRefused(path, "layout version 2");
  }
  SECTION("truncated below what the header promises") {
    REQUIRE(::truncate(path.c_str(), kSegmentHeaderBytes + 8 * 4 * sizeof(float)) == 0);
    RequireRefused(path, "shorter");
  }
  SECTION("truncated inside the header") {
    REQUIRE(::truncate(path.c_str(), 100) == 0);
    RequireRefused(path, "shorter");
  }
  SECTION("a flipped data byte inside the rows") {
    const off_t off = kSegmentHeaderBytes + 5 * 4 * sizeof(float) + 2;
    unsigned char b = 0;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(::pread(fd, &b, 1, off) == 1);
    ::close(fd);
    b ^= 0x01;
    Pwrite(path, &b, 1, off);
    RequireRefused(path, "checksum");
  }
  SECTION("rows greater than capacity") {
    SegmentHeader h{};
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
    ::close(fd);
    uint64_t rows = h.capacity_rows + 1;
    Pwrite(path, &rows, sizeof rows, offsetof(SegmentHeader, rows));
    RequireRefused(path, "capacity");
  }
  SECTION("DatasetWriter::Open refuses it too") {
    Pwrite(path, "XXXX", 4, 0);
    auto reopened = DatasetWriter::Open(path);
    REQUIRE_FALSE(reopened.ok());
    CHECK(reopened.status().code() == Status::Code::kCorruption);
    CHECK_THAT(reopened.status().message(), Catch::Contains(path));
  }
}

TEST_CASE("A missing segment is an error naming the path", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("absent.bin");
  auto v = DatasetView::Map(path);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.status().message(), Catch::Contains(path));
}

TEST_CASE("The reader maps the file read-only and shared", "[segment]") {
  TempDir dir;
  const std::string path = dir.File("mapped.bin");
  MustCreate(path, MakeTable(3, 2), 0);
  auto v = MustMap(path);
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  std::string line, found;
  while (std::getline(maps, line)) {
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0)
      found += line + "\n";
  }
  INFO("mappings of " << path << ":\n" << found);
  REQUIRE_FALSE(found.empty());
  // perms are the second field of every mapping of the file: "r--s" (no write, shared).
  std::istringstream lines(found);
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string range, perms;
    fields >> range >> perms;
    CHECK(perms == "r--s");
  }
}

}  // namespace
}  // namespace ens
