// Tests of orchestrator/ensemble_summary: a 3-member example computed by hand, the edge
// cases of one and no member, and a classification summary.
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
  CHECK(j["ensemble_error"].get<double>() == Approx(std::sqrt(0.5)));  // a regression's error is its RMSE
  CHECK(j.size() == 6);
}

TEST_CASE("Several targets: each target's ensemble RMSE, their mean, and the disagreement averaged", "[summary]") {
  // Two targets, rows of [t0, t1]: t0 is ThreeMembers' column, t1 is exact (error 0) but its
  // members disagree by +-2 on every row.
  const std::vector<float> y = {1, 10, 2, 20, 3, 30, 4, 40};
  std::vector<MemberResult> members = {Member("a", 0.5, {1, 8, 2, 18, 3, 28, 4, 38}),
                                       Member("b", 1.0, {2, 12, 2, 22, 3, 32, 6, 42}),
                                       Member("c", 1.5, {0, 10, 2, 20, 6, 30, 5, 40})};
  EnsembleSummary s = SummariseEnsemble(members, y, 0, false, 2);
  REQUIRE(s.ensemble_rmse_per_target.size() == 2);
  CHECK(s.ensemble_rmse_per_target[0] == Approx(std::sqrt(0.5)));
  CHECK(s.ensemble_rmse_per_target[1] == Approx(0.0).margin(1e-12));
  CHECK(s.ensemble_rmse == Approx(std::sqrt(0.5) / 2));
  CHECK(s.ensemble_error == s.ensemble_rmse);
  // t1's members: {-2, +2, 0} around the truth, population std sqrt(8/3) on every row.
  CHECK(s.mean_disagreement == Approx(((2 * std::sqrt(2.0 / 3.0) + std::sqrt(2.0)) / 4 + std::sqrt(8.0 / 3.0)) / 2));
  CHECK(s.ToJson()["ensemble_rmse_per_target"].size() == 2);
  CHECK_FALSE(SummariseEnsemble(ThreeMembers(), kHoldoutY).ToJson().contains("ensemble_rmse_per_target"));
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

TEST_CASE("A classification summary scores the members' mean probabilities", "[summary]") {
  // Two rows, two classes; labels {0, 1}. Member a: {0.9, 0.1}, {0.4, 0.6}; b: {0.7, 0.3}, {0.8, 0.2}.
  MemberResult a = Member("a", 0, {0.9f, 0.1f, 0.4f, 0.6f});
  MemberResult b = Member("b", 0, {0.7f, 0.3f, 0.8f, 0.2f});
  a.metrics["holdout_accuracy"] = 1.0;
  b.metrics["holdout_accuracy"] = 0.5;
  EnsembleSummary s = SummariseEnsemble({a, b}, {0.0f, 1.0f}, 2);
  CHECK(s.classes == 2);
  CHECK(s.member_accuracy_mean == Approx(0.75));
  CHECK(s.member_accuracy_std == Approx(std::sqrt(0.125)));
  // Mean: {0.8, 0.2} (right), {0.6, 0.4} (wrong: class 0 wins row 2).
  CHECK(s.ensemble_accuracy == Approx(0.5));
  CHECK(s.ensemble_error == Approx(0.5));
  CHECK(s.ensemble_nll == Approx((-std::log(0.8) - std::log(0.4)) / 2));
  CHECK(s.ensemble_brier == Approx((0.04 + 0.04 + 0.36 + 0.36) / 2));
  CHECK(s.mean_disagreement > 0.0);
  nlohmann::json j = s.ToJson();
  CHECK(j.contains("ensemble_accuracy"));
  CHECK_FALSE(j.contains("ensemble_rmse"));
  CHECK(SummaryError(j) == Approx(0.5));
  CHECK(SummaryError({{"ensemble_rmse", 2.5}}) == 2.5);  // a summary written before ensemble_error
}

TEST_CASE("A Gaussian summary scores the mixture of the members' heads", "[summary]") {
  // Two members, one row: N(0, 1) and N(2, 1); y = 1.
  MemberResult a = Member("a", 1.0, {0.0f, 1.0f});
  MemberResult b = Member("b", 1.0, {2.0f, 1.0f});
  a.metrics["holdout_nll"] = 1.0;
  b.metrics["holdout_nll"] = 2.0;
  EnsembleSummary s = SummariseEnsemble({a, b}, {1.0f}, 0, true);
  CHECK(s.ensemble_rmse == Approx(0.0).margin(1e-12));  // the mixture's mean is 1
  CHECK(s.member_nll_mean == Approx(1.5));
  // Both densities at y = 1 are N(1; mu, 1) = exp(-1/2) / sqrt(2 pi): so is the mixture's.
  CHECK(s.ensemble_nll == Approx(0.5 * std::log(2 * M_PI) + 0.5));
  CHECK(s.mean_aleatoric_std == Approx(1.0));
  CHECK(s.mean_epistemic_std == Approx(1.0));
  CHECK(s.mean_disagreement == Approx(1.0));
  nlohmann::json j = s.ToJson();
  CHECK(j.contains("ensemble_nll"));
  CHECK(j.contains("mean_aleatoric_std"));
  CHECK(SummaryError(j) == Approx(0.0).margin(1e-12));
}

}  // namespace
}  // namespace ens
