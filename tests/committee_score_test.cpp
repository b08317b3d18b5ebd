// Tests of orchestrator/committee_score: std (regression and per class), entropy and BALD
// against values worked out by hand, and their bounds.
#include "common/scoring/committee_score.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace ens {
namespace {

TEST_CASE("std is the population std of each row", "[committee]") {
  std::vector<float> a = {1, 0, 0, 2, 10, 1};
  std::vector<float> b = {1, 3, 0, 2, 0, 2};
  std::vector<float> c = {1, 0, 6, 5, 5, 3};
  std::vector<double> s = CommitteeScores(CommitteeScore::kStd, {&a, &b, &c}, 1);
  REQUIRE(s.size() == 6);
  CHECK(s[0] == 0.0);
  CHECK(s[1] == Approx(std::sqrt(2.0)));
  CHECK(s[2] == Approx(std::sqrt(8.0)));
  CHECK(s[3] == Approx(std::sqrt(2.0)));
  CHECK(s[4] == Approx(std::sqrt(50.0 / 3.0)));
  CHECK(s[5] == Approx(std::sqrt(2.0 / 3.0)));
  // A single member, or identical members, disagree by exactly nothing.
  CHECK(CommitteeScores(CommitteeScore::kStd, {&a}, 1) == std::vector<double>(6, 0.0));
  CHECK(CommitteeScores(CommitteeScore::kStd, {&c, &c, &c, &c}, 1) == std::vector<double>(6, 0.0));
}

TEST_CASE("std stays accurate for predictions far from zero", "[committee]") {
  std::vector<float> lo = {999.5f, -1000.5f, 100000.5f};
  std::vector<float> hi = {1000.5f, -999.5f, 100001.5f};
  std::vector<double> s = CommitteeScores(CommitteeScore::kStd, {&lo, &hi}, 1);
  REQUIRE(s.size() == 3);
  for (double v : s) CHECK(v == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("For classes, std is the mean over classes of the probabilities' std", "[committee]") {
  std::vector<float> a = {1.0f, 0.0f}, b = {0.0f, 1.0f};  // one row, two classes
  std::vector<double> s = CommitteeScores(CommitteeScore::kStd, {&a, &b}, 2);
  REQUIRE(s.size() == 1);
  CHECK(s[0] == Approx(0.5));
}

TEST_CASE("entropy is of the mean prediction - bald subtracts the members' mean entropy", "[committee]") {
  // Row 0: confident members that disagree. Row 1: members that agree on a coin flip.
  std::vector<float> a = {1.0f, 0.0f, 0.5f, 0.5f};
  std::vector<float> b = {0.0f, 1.0f, 0.5f, 0.5f};
  std::vector<double> entropy = CommitteeScores(CommitteeScore::kEntropy, {&a, &b}, 2);
  std::vector<double> bald = CommitteeScores(CommitteeScore::kBald, {&a, &b}, 2);
  REQUIRE(entropy.size() == 2);
  REQUIRE(bald.size() == 2);
  CHECK(entropy[0] == Approx(std::log(2.0)));
  CHECK(entropy[1] == Approx(std::log(2.0)));
  // Only the disagreement counts for BALD: all of row 0's uncertainty, none of row 1's.
  CHECK(bald[0] == Approx(std::log(2.0)));
  CHECK(bald[1] == Approx(0.0).margin(1e-12));
}

TEST_CASE("epistemic is the std of Gaussian heads' means, their variances left out", "[committee]") {
  std::vector<float> a = {1.0f, 9.0f, 5.0f, 0.1f};  // rows of [mean, variance]
  std::vector<float> b = {3.0f, 0.1f, 5.0f, 7.0f};
  std::vector<double> e = CommitteeScores(CommitteeScore::kEpistemic, {&a, &b}, 2);
  REQUIRE(e.size() == 2);
  CHECK(e[0] == Approx(1.0));
  CHECK(e[1] == 0.0);
}

TEST_CASE("bald is never negative and never above the entropy", "[committee]") {
  std::vector<float> a = {0.2f, 0.3f, 0.5f, 0.9f, 0.05f, 0.05f};
  std::vector<float> b = {0.25f, 0.25f, 0.5f, 0.1f, 0.1f, 0.8f};
  std::vector<float> c = {0.3f, 0.3f, 0.4f, 0.3f, 0.3f, 0.4f};
  std::vector<double> entropy = CommitteeScores(CommitteeScore::kEntropy, {&a, &b, &c}, 3);
  std::vector<double> bald = CommitteeScores(CommitteeScore::kBald, {&a, &b, &c}, 3);
  for (size_t r = 0; r < 2; ++r) {
    CHECK(bald[r] >= 0.0);
    CHECK(bald[r] <= entropy[r] + 1e-12);
  }
  CHECK(bald[1] > bald[0]);  // row 1's members disagree far more
}

}  // namespace
}  // namespace ens
