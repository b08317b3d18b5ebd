// LoadCsv: column selection, tolerant whitespace/line endings, and the exact
// "file:line:column" of every rejected input.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cerrno>

#include <catch2/catch.hpp>

#include "common/data/data_source.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

using testing::TempDir;

// The error message of loading `content`, which must fail.
std::string LoadError(const std::string& content, const std::vector<std::string>& features = {},
                      const std::string& target = "y") {
  TempDir dir;
  const std::string path = dir.Write("d.csv", content);
  StatusOr<Table> t = LoadCsv(path, features, target);
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Status::Code::kInvalidArgument);
  // Report positions relative to the file name so expectations stay short.
  const std::string& m = t.status().message();
  REQUIRE_THAT(m, StartsWith(path));
  return "d.csv" + m.substr(path.size());
}

TEST_CASE("LoadCsv selects named columns in the requested order, target anywhere") {
  TempDir dir;
  const std::string path =
      dir.Write("d.csv", " id , b ,y,a\r\n1, 2.5 ,3,4\r\n\r\n  \r\n5,-6e-1,7,+8\r\n");
  StatusOr<Table> t = LoadCsv(path, {"a", "b"}, "y");
  REQUIRE(t.ok());
  CHECK(t->features == 2);
  CHECK(t->feature_names == std::vector<std::string>{"a", "b"});
  CHECK(t->target_names == std::vector<std::string>{"y"});
  CHECK(t->x == std::vector<float>{4.0f, 2.5f, 8.0f, -0.6f});
  CHECK(t->y == std::vector<float>{3.0f, 7.0f});
  CHECK(t->rows() == 2);
}

TEST_CASE("LoadCsv reads several target columns in the order given, the rest are features") {
  TempDir dir;
  const std::string path = dir.Write("d.csv", "b,x1,a,x2\n1,2,3,4\n5,6,7,8\n");
  StatusOr<Table> t = LoadCsv(path, {}, std::vector<std::string>{"a", "b"});
  REQUIRE(t.ok());
  CHECK(t->rows() == 2);
  CHECK(t->targets == 2);
  CHECK(t->target_names == std::vector<std::string>{"a", "b"});
  CHECK(t->feature_names == std::vector<std::string>{"x1", "x2"});
  CHECK(t->x == std::vector<float>{2, 4, 6, 8});
  CHECK(t->y == std::vector<float>{3, 1, 7, 5});
  auto twice = LoadCsv(path, {}, std::vector<std::string>{"a", "a"});
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.status().message(), Contains("target column 'a' listed twice"));
  auto both = LoadCsv(path, {"x1", "a"}, std::vector<std::string>{"a", "b"});
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.status().message(), Contains("column 'a' is both target and feature"));
  auto bad = dir.Write("bad.csv", "a,b,x\n1,2,3\n4,oops,6\n");
  auto parsed = LoadCsv(bad, {}, std::vector<std::string>{"a", "b"});
  REQUIRE_FALSE(parsed.ok());
  CHECK_THAT(parsed.status().message(), StartsWith(bad + ":3:2"));
}

TEST_CASE("LoadCsv defaults to every column but the target") {
  TempDir dir;
  const std::string path = dir.Write("d.csv", "a,target,b\n1,2,3\n4,5,6");  // no final newline
  StatusOr<Table> t = LoadCsv(path, {}, "target");
  REQUIRE(t.ok());
  CHECK(t->feature_names == std::vector<std::string>{"a", "b"});
  CHECK(t->target_names == std::vector<std::string>{"target"});
  CHECK(t->x == std::vector<float>{1, 3, 4, 6});
  CHECK(t->y == std::vector<float>{2, 5});
}

TEST_CASE("LoadCsv ignores unselected text columns") {
  TempDir dir;
  const std::string path = dir.Write("d.csv", "name,a,y\nalice,1,2\n");
  StatusOr<Table> t = LoadCsv(path, {"a"}, "y");
  REQUIRE(t.ok());
  CHECK(t->x == std::vector<float>{1});
}

TEST_CASE("LoadCsv names line and column of a bad number") {
  CHECK_THAT(LoadError("a,y\n1,2\n3,abc\n"), StartsWith("d.csv:3:2: cannot parse 'abc'"));
  CHECK_THAT(LoadError("a,y\n1,2x\n"), StartsWith("d.csv:2:2: cannot parse '2x'"));
  CHECK_THAT(LoadError("a,y\n,2\n"), StartsWith("d.csv:2:1: empty value"));
  CHECK_THAT(LoadError("a,y\n1e39,2\n"), StartsWith("d.csv:2:1: value '1e39' is out of float32"));
}

TEST_CASE("LoadCsv counts skipped empty lines in line numbers") {
  CHECK_THAT(LoadError("a,y\n\n1,2\n\r\nq,3\n"), StartsWith("d.csv:5:1: "));
}

TEST_CASE("LoadCsv rejects NaN and Inf") {
  CHECK_THAT(LoadError("a,y\n1,2\nnan,1\n"), StartsWith("d.csv:3:1: non-finite value 'nan'"));
  CHECK_THAT(LoadError("a,y\n1,inf\n"), StartsWith("d.csv:2:2: non-finite value 'inf'"));
  CHECK_THAT(LoadError("a,y\n1,-Infinity\n"), StartsWith("d.csv:2:2: non-finite value"));
}

TEST_CASE("LoadCsv rejects a wrong field count at the first missing or extra field") {
  CHECK_THAT(LoadError("a,b,y\n1,2,3\n1,2\n"),
             StartsWith("d.csv:3:3: expected 3 fields, found 2"));
  CHECK_THAT(LoadError("a,b,y\n1,2,3,4\n"), StartsWith("d.csv:2:4: expected 3 fields, found 4"));
}

TEST_CASE("LoadCsv names a missing target or feature column at the header") {
  CHECK_THAT(LoadError("a,b\n1,2\n", {}, "y"),
             StartsWith("d.csv:1:1: target column 'y' not in header"));
  CHECK_THAT(LoadError("a,y\n1,2\n", {"a", "c"}, "y"),
             StartsWith("d.csv:1:1: feature column 'c' not in header"));
  CHECK_THAT(LoadError("a,y\n1,2\n", {"a", "y"}, "y"), Contains("both target and feature"));
  CHECK_THAT(LoadError("a,y\n1,2\n", {"a", "a"}, "y"), Contains("listed twice"));
}

TEST_CASE("LoadCsv rejects duplicate and empty header names") {
  CHECK_THAT(LoadError("a,b,a,y\n1,2,3,4\n"),
             StartsWith("d.csv:1:3: duplicate column name 'a' (first at column 1)"));
  CHECK_THAT(LoadError("a,,y\n1,2,3\n"), StartsWith("d.csv:1:2: empty column name"));
}

TEST_CASE("LoadCsv rejects empty files and files without data rows") {
  CHECK_THAT(LoadError(""), StartsWith("d.csv:1:1: empty file"));
  CHECK_THAT(LoadError("\n \r\n"), StartsWith("d.csv:1:1: empty file"));
  CHECK_THAT(LoadError("a,y\n\n"), StartsWith("d.csv:1:1: no data rows"));
}

TEST_CASE("LoadCsv says quoted fields are not supported") {
  CHECK_THAT(LoadError("a,y\n\"1\",2\n"), StartsWith("d.csv:2:1: quoted fields are not supported"));
  CHECK_THAT(LoadError("\"a\",y\n1,2\n"), StartsWith("d.csv:1:1: quoted fields are not supported"));
}

TEST_CASE("LoadCsv names the path of a missing file") {
  TempDir dir;
  const std::string path = dir.Write("present.csv", "a,y\n1,2\n") + ".missing";
  StatusOr<Table> t = LoadCsv(path, {}, "y");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Status::Code::kNotFound);
  CHECK_THAT(t.status().message(), StartsWith(path + ": "));
}

TEST_CASE("an input the run's user may not read is a permanent error, a missing one not found",
          "[data][csv]") {
  // Mapped once for every data file (a restart cannot give the run permission: exit 78).
  Status denied = Status::FromInputErrno("/d/train.csv", EACCES);
  CHECK(denied.code() == Status::Code::kInvalidArgument);
  CHECK(denied.message() == "/d/train.csv: Permission denied (the run's user may not read it)");
  CHECK(Status::FromInputErrno("/d/train.csv", EPERM).code() == Status::Code::kInvalidArgument);
  CHECK(Status::FromInputErrno("/d/train.csv", ENOENT).code() == Status::Code::kNotFound);
  CHECK(Status::FromInputErrno("/d/train.csv", EIO).code() == Status::Code::kIOError);
}

}  // namespace
}  // namespace ens
