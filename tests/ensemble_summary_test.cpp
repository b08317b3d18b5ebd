// Tests of orchestrator/ensemble_summary: a 3-member example computed by hand, the edge
// cases of one and no member, and PredictionStd (population std per row).
#include "orchestrator/ensemble_summary.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace ens {
namespace {

MemberResult Member(const char* name, double holdout_rmse, std::vector<float> holdout_pred) {
  MemberResult r;
  r.name = name;
  r.metrics = {{"member", name}, {"holdout_rmse", holdout_rmse}};
  r.holdout_pred = std::move(holdout_pred);
  return r;
}

// holdout_y = {1, 2, 3, 4}; predictions per row:
//   row0 {1, 2, 0}: mean 1 (err 0), std sqrt(2/3)
//   row1 {2, 2, 2}: mean 2 (err 0), std 0
//   row2 {3, 3, 6}: mean 4 (err 1), std sqrt 2
//   row3 {4, 6, 5}: mean 5 (err 1), std sqrt(2/3)
// ensemble RMSE = sqrt(2 / 4); mean disagreement = (2 sqrt(2/3) + sqrt 2) / 4.
// Member RMSEs 0.5, 1.0, 1.5 from metrics: mean 1.0, sample std 0.5.
std::vector<MemberResult> ThreeMembers() {
  return {Member("a", 0.5, {1, 2, 3, 4}), Member("b", 1.0, {2, 2, 3, 6}),
          Member("c", 1.5, {0, 2, 6, 5})};
}
const std::vector<float> kHoldoutY = {1, 2, 3, 4};

TEST_CASE("A 3-member ensemble summarises as computed by hand", "[summary]") {
  EnsembleSummary s = SummariseEnsemble(ThreeMembers(), kHoldoutY);
  CHECK(s.members == 3);
  CHECK(s.member_rmse_mean == Approx(1.0));
  CHECK(s.member_rmse_std == Approx(0.5));  // sample std (n - 1), not population (0.408)
  CHECK(s.ensemble_rmse == Approx(std::sqrt(0.5)));
  CHECK(s.mean_disagreement == Approx((2 * std::sqrt(2.0 / 3.0) + std::sqrt(2.0)) / 4));

  nlohmann::json j = s.ToJson();
  CHECK(j["members"] == 3);
  CHECK(j["member_rmse_mean"].get<double>() == Approx(1.0));
  CHECK(j["member_rmse_std"].get<double>() == Approx(0.5));
  CHECK(j["ensemble_rmse"].get<double>() == Approx(std::sqrt(0.5)));
  CHECK(j["mean_disagreement"].get<double>() == Approx(s.mean_disagreement));
  CHECK(j.size() == 5);
}

TEST_CASE("An ensemble beats its members when their errors cancel", "[summary]") {
  // Two members off by +1 and -1 everywhere: each RMSE 1, the mean is exact.
  std::vector<MemberResult> r = {Member("up", 1.0, {2, 3, 4}), Member("down", 1.0, {0, 1, 2})};
  EnsembleSummary s = SummariseEnsemble(r, {1, 2, 3});
  CHECK(s.ensemble_rmse == Approx(0.0).margin(1e-12));
  CHECK(s.member_rmse_mean == Approx(1.0));
  CHECK(s.member_rmse_std == Approx(0.0).margin(1e-12));
  CHECK(s.mean_disagreement == Approx(1.0));  // population std of {x-1, x+1} is 1
}

TEST_CASE("One member has zero spread - no member gives an empty summary", "[summary]") {
  EnsembleSummary one = SummariseEnsemble({Member("solo", 0.7, {1, 2, 5, 4})}, kHoldoutY);
  CHECK(one.members == 1);
  CHECK(one.member_rmse_mean == Approx(0.7));
  CHECK(one.member_rmse_std == 0.0);
  CHECK(one.ensemble_rmse == Approx(1.0));  // one error of 2 over 4 rows: sqrt(4 / 4)
  CHECK(one.mean_disagreement == 0.0);

  EnsembleSummary none = SummariseEnsemble({}, kHoldoutY);
  CHECK(none.members == 0);
  CHECK(none.member_rmse_mean == 0.0);
  CHECK(none.ensemble_rmse == 0.0);
  CHECK(none.mean_disagreement == 0.0);
}

TEST_CASE("PredictionStd is the population std of each row", "[summary]") {
  std::vector<float> a = {1, 0, 0, 2, 10, 1};
  std::vector<float> b = {1, 3, 0, 2, 0, 2};
  std::vector<float> c = {1, 0, 6, 5, 5, 3};
  std::vector<double> s = PredictionStd({&a, &b, &c});
  REQUIRE(s.size() == 6);
  CHECK(s[0] == 0.0);
  CHECK(s[1] == Approx(std::sqrt(2.0)));
  CHECK(s[2] == Approx(std::sqrt(8.0)));
  CHECK(s[3] == Approx(std::sqrt(2.0)));
  CHECK(s[4] == Approx(std::sqrt(50.0 / 3.0)));
  CHECK(s[5] == Approx(std::sqrt(2.0 / 3.0)));

  // A single member, or identical members, disagree by exactly nothing.
  std::vector<double> single = PredictionStd({&a});
  CHECK(single == std::vector<double>(6, 0.0));
  CHECK(PredictionStd({&c, &c, &c, &c}) == std::vector<double>(6, 0.0));
  CHECK(PredictionStd({}).empty());
}

TEST_CASE("PredictionStd stays accurate for predictions far from zero", "[summary]") {
  // Spread 0.5 around 1000: std of {999.5, 1000.5} is 0.5 whatever the offset.
  std::vector<float> lo = {999.5f, -1000.5f, 100000.5f};
  std::vector<float> hi = {1000.5f, -999.5f, 100001.5f};
  std::vector<double> s = PredictionStd({&lo, &hi});
  REQUIRE(s.size() == 3);
  for (double v : s) CHECK(v == Approx(0.5).epsilon(1e-6));
}

}  // namespace
}  // namespace ens
