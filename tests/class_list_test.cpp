// Tests of common/class_list and the label side of the loaders: canonical labels, the order
// of classes, the limits (one class, more than 10,000), labels in CSV and npy files (unknown
// and non-integer labels named by place), and the stratified holdout of a classification run.
#include "common/config/class_list.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "common/data/data_source.h"
#include "common/data/npy_writer.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using testing::TempDir;
using testing::WriteText;

TEST_CASE("Integer labels are canonical by value, other labels are their text", "[labels]") {
  CHECK(CanonicalLabel("7") == "7");
  CHECK(CanonicalLabel("07") == "7");
  CHECK(CanonicalLabel("+3") == "3");
  CHECK(CanonicalLabel("-2") == "-2");
  CHECK(CanonicalLabel("1.0") == "1.0");
  CHECK(CanonicalLabel("cat") == "cat");
  CHECK(CanonicalLabel("-") == "-");
}

TEST_CASE("Classes sort by value when all are integers, else bytewise", "[labels]") {
  auto ints = ClassList::FromLabels({"10", "9", "-1", "2", "9"}, "f");
  REQUIRE(ints.ok());
  CHECK(ints->names() == std::vector<std::string>{"-1", "2", "9", "10"});
  CHECK(ints->Index("10") == 3);
  CHECK(ints->Index("11") == -1);
  auto words = ClassList::FromLabels({"red", "blue", "10", "green"}, "f");
  REQUIRE(words.ok());
  CHECK(words->names() == std::vector<std::string>{"10", "blue", "green", "red"});
  auto back = ClassList::FromJson(words->ToJson(), "run.json");
  REQUIRE(back.ok());
  CHECK(back->names() == words->names());
  CHECK_FALSE(ClassList::FromJson(nlohmann::json{"b", "a"}, "run.json").ok());
  CHECK_FALSE(ClassList::FromJson(nlohmann::json{1, 2}, "run.json").ok());
}

TEST_CASE("One class, or more than 10000, is refused naming the file", "[labels]") {
  auto one = ClassList::FromLabels({"a", "a"}, "train.csv");
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.status().message(), Catch::Contains("train.csv") && Catch::Contains("at least 2 classes") &&
                                         Catch::Contains("only 'a'"));
  LabelCollector c;
  float t = 0;
  for (size_t i = 0; i < kMaxClasses; ++i) REQUIRE(c.Map(std::to_string(i), "f:1:1: ", &t).ok());
  REQUIRE(c.Map("0", "f:2:1: ", &t).ok());  // a label seen before is not a new class
  Status s = c.Map("10000", "f:9:3: ", &t);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::StartsWith("f:9:3: ") && Catch::Contains("10000"));
}

TEST_CASE("CSV labels map to class indices - an unknown label names file, line and column", "[labels]") {
  TempDir d;
  WriteText(d / "t.csv", "a,b,kind\n1,2,red\n3,4, blue\n5,6,red\n");
  auto classes = ClassList::FromLabels({"blue", "red"}, "t");
  REQUIRE(classes.ok());
  auto t = LoadCsv(d / "t.csv", {}, "kind", &*classes);
  REQUIRE(t.ok());
  CHECK(t->y == std::vector<float>{1, 0, 1});
  WriteText(d / "bad.csv", "a,b,kind\n1,2,red\n3,4,green\n");
  auto bad = LoadCsv(d / "bad.csv", {}, "kind", &*classes);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::StartsWith(d / "bad.csv" + ":3:3: ") &&
                                         Catch::Contains("label 'green' is not one of the run's 2 classes (blue, red)"));
  WriteText(d / "empty.csv", "a,b,kind\n1,2,\n");
  auto empty = LoadCsv(d / "empty.csv", {}, "kind", &*classes);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::StartsWith(d / "empty.csv" + ":2:3: "));
}

TEST_CASE("npy labels: integer dtypes and whole floats - a fraction names its element", "[labels]") {
  TempDir d;
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  REQUIRE(WriteNpyFloat32(d / "x.npy", x.data(), 3, 2, 2).ok());
  REQUIRE(WriteNpyInt64(d / "y.npy", {2, 0, 2}).ok());
  auto classes = ClassList::FromLabels({"0", "2"}, "y");
  REQUIRE(classes.ok());
  auto t = LoadNpyPair(d / "x.npy", d / "y.npy", &*classes);
  REQUIRE(t.ok());
  CHECK(t->y == std::vector<float>{1, 0, 1});
  // Without a label map an integer y is not a regression target.
  CHECK_FALSE(LoadNpyPair(d / "x.npy", d / "y.npy").ok());

  const std::vector<float> whole = {2, 0, 2}, frac = {2, 0.5f, 2};
  REQUIRE(WriteNpyFloat32(d / "yw.npy", whole.data(), 3, 1, 1).ok());
  REQUIRE(WriteNpyFloat32(d / "yf.npy", frac.data(), 3, 1, 1).ok());
  CHECK(LoadNpyPair(d / "x.npy", d / "yw.npy", &*classes).ok());
  auto bad = LoadNpyPair(d / "x.npy", d / "yf.npy", &*classes);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("yf.npy") && Catch::Contains("element 1") &&
                                         Catch::Contains("label 0.5 is not an integer"));
  REQUIRE(WriteNpyInt64(d / "y7.npy", {2, 7, 2}).ok());
  auto unknown = LoadNpyPair(d / "x.npy", d / "y7.npy", &*classes);
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("element 1 (row 1)") && Catch::Contains("label '7'"));
}

TEST_CASE("A classification run's classes come from every file - its holdout is stratified", "[labels]") {
  TempDir d;
  // 300 rows: 210 of "a", 60 of "b", 30 of "c"; the pool adds a class train lacks.
  auto label = [](int i) { return std::string(i % 5 == 1 ? "b" : i % 10 == 3 ? "c" : "a"); };
  std::string train = "x0,x1,y\n";
  std::map<std::string, int> in_file;
  for (int i = 0; i < 300; ++i) {
    train += std::to_string(i) + "," + std::to_string(i % 7) + "," + label(i) + "\n";
    ++in_file[label(i)];
  }
  WriteText(d / "train.csv", train);
  WriteText(d / "pool.csv", "x0,x1,y\n1,2,d\n3,4,a\n");
  DataSpec spec;
  spec.source = DataSource::kCsv;
  spec.train_path = d / "train.csv";
  spec.pool_path = d / "pool.csv";
  spec.target_columns = {"y"};
  spec.holdout_fraction = 0.25;
  auto data = LoadRunData(spec, 7, TaskKind::kClassification);
  REQUIRE(data.ok());
  CHECK(data->classes == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(data->pool.y == std::vector<float>{3, 0});
  std::map<int, int> held;
  for (float y : data->holdout.y) ++held[static_cast<int>(y)];
  CHECK(held[0] == std::lround(0.25 * in_file["a"]));
  CHECK(held[1] == std::lround(0.25 * in_file["b"]));
  CHECK(held[2] == std::lround(0.25 * in_file["c"]));
  CHECK(data->train.rows() + data->holdout.rows() == 300);
  // The same run seed chooses the same rows.
  auto again = LoadRunData(spec, 7, TaskKind::kClassification);
  REQUIRE(again.ok());
  CHECK(again->holdout.x == data->holdout.x);

  WriteText(d / "one.csv", "x0,y\n1,a\n2,a\n3,a\n4,a\n5,a\n");
  spec.train_path = d / "one.csv";
  spec.pool_path = "";
  auto one = LoadRunData(spec, 7, TaskKind::kClassification);
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.status().message(), Catch::Contains("one.csv") && Catch::Contains("at least 2 classes"));
}

}  // namespace
}  // namespace ens
