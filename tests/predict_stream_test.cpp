// ensemblectl predict --input -: batches on stdin, each answered with its own CSV block, the
// same numbers as a file-mode predict of the same rows; a bad batch names itself.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

const char* const kHeader = "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9";
const char* const kRows[] = {"0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.0", "0.9,0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1,0.0",
                             "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5", "0.0,0.1,0.0,0.1,0.0,0.1,0.0,0.1,0.0,0.1",
                             "1.0,1.0,0.0,0.0,1.0,1.0,0.0,0.0,1.0,1.0"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// "mean,std" of row r of a block, without its row number.
std::string Values(const std::string& line) { return line.substr(line.find(',') + 1); }

TEST_CASE("batches on stdin are answered block by block with the file-mode numbers", "[bits]") {
  TempDir tmp;
  const std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", R"({"run_name": "stream", "state_dir": ")" + state + R"(", "run_seed": 2,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 50, "holdout_rows": 60}},
    "members": {"defaults": {"epochs": 3, "layers": [{"units": 8}]}, "count": 3}})");
  auto run = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);

  std::string all = std::string(kHeader) + "\n";
  for (const char* r : kRows) all += std::string(r) + "\n";
  WriteText(tmp / "all.csv", all);
  auto file = Run({BinaryPath("ensemblectl"), "predict", "-s", state, "-i", tmp / "all.csv"}, tmp.path());
  REQUIRE(file.code == 0);
  const auto want = Lines(file.out);
  REQUIRE(want.size() == 6);

  // Two batches: rows 0-2, then rows 3-4 (the last without a closing blank line).
  std::string input = std::string(kHeader) + "\n" + kRows[0] + "\n" + kRows[1] + "\n" + kRows[2] + "\n\n" + kRows[3] +
                      "\n" + kRows[4] + "\n";
  WriteText(tmp / "batches.txt", input);
  auto stream = Run({"/bin/sh", "-c", BinaryPath("ensemblectl") + " predict -s " + state + " -i - < " + (tmp / "batches.txt")},
                    tmp.path());
  INFO(stream.err);
  REQUIRE(stream.code == 0);
  const auto got = Lines(stream.out);
  REQUIRE(got.size() == 4 + 1 + 3 + 1);
  CHECK(got[0] == "row,mean,std");
  CHECK(got[4].empty());
  CHECK(got[5] == "row,mean,std");
  CHECK(got[8].empty());
  for (int r = 0; r < 3; ++r) CHECK(Values(got[1 + r]) == Values(want[1 + r]));
  for (int r = 0; r < 2; ++r) {
    CHECK(got[6 + r].rfind(std::to_string(r) + ",", 0) == 0);  // rows are numbered per batch
    CHECK(Values(got[6 + r]) == Values(want[4 + r]));
  }

  // A batch with a missing column stops the stream with a message naming it.
  WriteText(tmp / "bad.txt", std::string(kHeader) + "\n" + kRows[0] + "\n\n0.1,0.2\n");
  auto bad = Run({"/bin/sh", "-c", BinaryPath("ensemblectl") + " predict -s " + state + " -i - < " + (tmp / "bad.txt")},
                 tmp.path());
  CHECK(bad.code == 78);
  CHECK_THAT(bad.err, Catch::Contains("stdin batch 2"));
  CHECK(Lines(bad.out).size() == 3);  // the first batch was answered before the second was read
}

}  // namespace
}  // namespace ens
