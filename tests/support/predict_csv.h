// `ensemblectl predict` of a run's state on an input CSV, and its output read back: the
// header line and each row's cells. For the whole-run tests (tests/*_run_test.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "process_harness.h"
#include "temp_dir.h"

namespace ens::testing {

struct PredictedCsv {
  std::string header;
  std::vector<std::vector<std::string>> rows;  // each row's cells, split at ','
};

// Writes input_csv to tmp/in.csv, predicts with the committed round of `state` into
// tmp/out.csv and reads it; predict must exit 0.
inline PredictedCsv PredictCsv(const TempDir& tmp, const std::string& state, const std::string& input_csv) {
  WriteText(tmp / "in.csv", input_csv);
  auto predict = Run({BinaryPath("ensemblectl"), "predict", "-s", state, "-i", tmp / "in.csv", "-o", tmp / "out.csv"},
                     tmp.path());
  INFO(predict.out << predict.err);
  REQUIRE(predict.code == 0);
  PredictedCsv out;
  std::istringstream lines(ReadText(tmp / "out.csv"));
  std::getline(lines, out.header);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string c; std::getline(fields, c, ',');) cells.push_back(c);
    out.rows.push_back(std::move(cells));
  }
  return out;
}

// A row's cells as numbers (std::stod: a cell that is not one fails the test with an exception).
inline std::vector<double> Numbers(const std::vector<std::string>& cells) {
  std::vector<double> v;
  for (const auto& c : cells) v.push_back(std::stod(c));
  return v;
}

}  // namespace ens::testing
