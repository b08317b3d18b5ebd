// Tests of orchestrator/ensemble_summary: a 3-member example computed by hand, the edge
// cases of one and no member, a classification summary, and the calibration figures
// (coverage, Gaussian NLL, ECE) against hand computations.
#include "orchestrator/run/ensemble_summary.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "common/base/seed.h"

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
  // and coverage_1sigma, coverage_2sigma, ensemble_gaussian_nll, interval_calibration_error, the
  // four calibrated figures, sigma_calibration and reliability
  CHECK(j.size() == 16);
  REQUIRE(j["sigma_calibration"].size() == 1);
  CHECK(j["reliability"]["nominal"].size() == kReliabilityLevels);
  CHECK(j["reliability"]["calibrated"].size() == kReliabilityLevels);
}

TEST_CASE("A round's summary calibrates an under-dispersed committee on its holdout", "[summary][calibration]") {
  // Three members that agree closely on every row, with errors far larger than their spread:
  // the raw +-2 sigma misses most rows; the calibrated one (cross-fitted) covers ~95 %.
  SeededRng rng(4);
  std::vector<float> y;
  std::vector<MemberResult> members(3);
  for (int i = 0; i < 2000; ++i) {
    const double truth = rng.Normal(), spread = 0.05 + 0.1 * rng.Uniform();
    y.push_back(static_cast<float>(truth + rng.Normal() * (0.3 + 3 * spread)));
    for (int k = 0; k < 3; ++k) members[k].holdout_pred.push_back(static_cast<float>(truth + (k - 1) * spread * 1.2247));
  }
  for (auto& m : members) m.metrics["holdout_rmse"] = 1.0;
  const EnsembleSummary s = SummariseEnsemble(members, y);
  REQUIRE(s.calibrated);
  CHECK(s.figure("coverage_2sigma").value() < 0.6);
  CHECK(s.figure("calibrated_coverage_1sigma").value() >= 0.63);
  CHECK(s.figure("calibrated_coverage_1sigma").value() <= 0.73);
  CHECK(s.figure("calibrated_coverage_2sigma").value() >= 0.93);
  CHECK(s.figure("calibrated_coverage_2sigma").value() <= 0.97);
  CHECK(s.figure("calibrated_nll").value() < s.figure("holdout_nll").value());
  CHECK(s.figure("calibrated_ice").value() < s.figure("ice").value());
  REQUIRE(s.sigma_maps.size() == 1);
  CHECK(s.sigma_maps[0].scale > 1.5);
  CHECK(s.sigma_maps[0].noise == Approx(0.3).margin(0.1));
}

// The Gaussian N(y; mean, sigma^2)'s -log density: 0.5 ln(2 pi) + ln sigma + e^2 / (2 sigma^2).
const double kHalfLog2Pi = 0.5 * std::log(2 * M_PI);

TEST_CASE("Regression calibration: coverage of the +-1 and 2 sigma intervals and the Gaussian NLL, by hand",
          "[summary][calibration]") {
  // Two members, 0 and 2 on every row: mean 1, sigma = population std of {0, 2} = 1.
  // y = 1.5, 2.5, 4: errors 0.5 (inside 1 sigma), 1.5 (inside 2 sigma only), 3 (outside both).
  std::vector<MemberResult> r = {Member("lo", 0, {0, 0, 0}), Member("hi", 0, {2, 2, 2})};
  EnsembleSummary s = SummariseEnsemble(r, {1.5f, 2.5f, 4.0f});
  REQUIRE(s.calibrated);
  CHECK(s.figure("coverage_1sigma").value() == Approx(1.0 / 3));
  CHECK(s.figure("coverage_2sigma").value() == Approx(2.0 / 3));
  // Per row 0.5 ln(2 pi) + ln 1 + e^2 / 2: e^2 / 2 = 0.125, 1.125, 4.5; mean 5.75 / 3.
  CHECK(s.figure("holdout_nll").value() == Approx(kHalfLog2Pi + 5.75 / 3));
  CHECK(s.coverage_1sigma_per_target.empty());  // one target: no per-target lists

  // ThreeMembers (above): per row (error, sigma) = (0, sqrt(2/3)), (0, 0), (1, sqrt 2), (1, sqrt(2/3)).
  // Row 1's members agree exactly: sigma 0 is floored at 1e-6, and its error 0 is inside both.
  // Row 3's error 1 > sqrt(2/3) = 0.816 but <= 2 sqrt(2/3): coverage 3/4 and 4/4.
  // NLL rows: c + 0.5 ln(2/3); c + ln 1e-6; c + 0.5 ln 2 + 1/4; c + 0.5 ln(2/3) + 3/4 (c = 0.5 ln 2 pi).
  EnsembleSummary t = SummariseEnsemble(ThreeMembers(), kHoldoutY);
  CHECK(t.figure("coverage_1sigma").value() == Approx(0.75));
  CHECK(t.figure("coverage_2sigma").value() == Approx(1.0));
  const double nll3 = kHalfLog2Pi + (std::log(2.0 / 3) + std::log(1e-6) + 0.5 * std::log(2.0) + 1.0) / 4;
  CHECK(t.figure("holdout_nll").value() == Approx(nll3));
  nlohmann::json j = t.ToJson();
  CHECK(j["coverage_1sigma"].get<double>() == Approx(0.75));
  CHECK(j["coverage_2sigma"].get<double>() == Approx(1.0));
  CHECK(j["ensemble_gaussian_nll"].get<double>() == Approx(nll3));

  // One member has no spread to judge: no calibration figures.
  EnsembleSummary one = SummariseEnsemble({Member("solo", 0.7, {1, 2, 5, 4})}, kHoldoutY);
  CHECK_FALSE(one.calibrated);
  CHECK_FALSE(one.ToJson().contains("coverage_1sigma"));
}

TEST_CASE("Several targets: calibration per target, and their mean", "[summary][calibration]") {
  // As the several-targets case above: t0 is ThreeMembers' column; t1 is exact, its members at
  // -2, +2, 0 around it (sigma sqrt(8/3) every row, error 0: covered, NLL c + 0.5 ln(8/3)).
  const std::vector<float> y = {1, 10, 2, 20, 3, 30, 4, 40};
  std::vector<MemberResult> members = {Member("a", 0.5, {1, 8, 2, 18, 3, 28, 4, 38}),
                                       Member("b", 1.0, {2, 12, 2, 22, 3, 32, 6, 42}),
                                       Member("c", 1.5, {0, 10, 2, 20, 6, 30, 5, 40})};
  EnsembleSummary s = SummariseEnsemble(members, y, RunHead::Regression(2));
  REQUIRE(s.coverage_1sigma_per_target.size() == 2);
  REQUIRE(s.coverage_2sigma_per_target.size() == 2);
  REQUIRE(s.ensemble_gaussian_nll_per_target.size() == 2);
  CHECK(s.coverage_1sigma_per_target[0] == Approx(0.75));
  CHECK(s.coverage_1sigma_per_target[1] == Approx(1.0));
  CHECK(s.coverage_2sigma_per_target[0] == Approx(1.0));
  CHECK(s.coverage_2sigma_per_target[1] == Approx(1.0));
  const double nll0 = kHalfLog2Pi + (std::log(2.0 / 3) + std::log(1e-6) + 0.5 * std::log(2.0) + 1.0) / 4;
  const double nll1 = kHalfLog2Pi + 0.5 * std::log(8.0 / 3);
  CHECK(s.ensemble_gaussian_nll_per_target[0] == Approx(nll0));
  CHECK(s.ensemble_gaussian_nll_per_target[1] == Approx(nll1));
  CHECK(s.figure("coverage_1sigma").value() == Approx(0.875));
  CHECK(s.figure("coverage_2sigma").value() == Approx(1.0));
  CHECK(s.figure("holdout_nll").value() == Approx((nll0 + nll1) / 2));
  nlohmann::json j = s.ToJson();
  CHECK(j["coverage_1sigma_per_target"].size() == 2);
  CHECK(j["coverage_2sigma_per_target"].size() == 2);
  CHECK(j["ensemble_gaussian_nll_per_target"][1].get<double>() == Approx(nll1));
}

TEST_CASE("Gaussian heads: calibration uses the mixture's total std", "[summary][calibration]") {
  // Two members, rows of [mean, variance]:
  //   row 0: N(0, 1), N(2, 1), y = 2.2: mean 1, sigma^2 = 1 (mean variance) + 1 (variance of
  //          {0, 2}) = 2; error 1.2 <= sqrt 2 = 1.414: inside 1 sigma (the aleatoric std 1 alone
  //          would miss it). NLL c + 0.5 ln 2 + 1.44 / 4.
  //   row 1: N(1, 0.25), N(1, 0.75), y = 2: sigma^2 = 0.5; error 1 > 0.707 but <= 1.414: inside
  //          2 sigma only. NLL c + 0.5 ln 0.5 + 1 / 1.
  //   row 2: N(0, 1) twice, y = 3: sigma 1, error 3: outside both. NLL c + 4.5.
  // Coverage 1/3 and 2/3; NLL c + (0.36 + 1 + 4.5) / 3 (the 0.5 ln 2 terms cancel).
  MemberResult a = Member("a", 0, {0.0f, 1.0f, 1.0f, 0.25f, 0.0f, 1.0f});
  MemberResult b = Member("b", 0, {2.0f, 1.0f, 1.0f, 0.75f, 0.0f, 1.0f});
  EnsembleSummary s = SummariseEnsemble({a, b}, {2.2f, 2.0f, 3.0f}, RunHead::Gaussian());
  REQUIRE(s.calibrated);
  CHECK(s.figure("coverage_1sigma").value() == Approx(1.0 / 3));
  CHECK(s.figure("coverage_2sigma").value() == Approx(2.0 / 3));
  CHECK(s.figure("holdout_nll").value() == Approx(kHalfLog2Pi + (0.36 + 1 + 4.5) / 3).epsilon(1e-6));
  nlohmann::json j = s.ToJson();
  CHECK(j["coverage_1sigma"].get<double>() == Approx(1.0 / 3));
  CHECK(j.contains("ensemble_nll"));  // the mixture's own density's NLL stays beside it
  CHECK(j["ensemble_gaussian_nll"].get<double>() != Approx(j["ensemble_nll"].get<double>()));
}

TEST_CASE("Classification: the expected calibration error over 15 equal-width bins, by hand",
          "[summary][calibration]") {
  // Two classes, four rows; each row's mean probabilities (members a and b average to them):
  //   row 0: {0.9, 0.1},   label 0: confidence 0.90, right  -> bin 13 (13/15, 14/15] = (0.867, 0.933]
  //   row 1: {0.08, 0.92}, label 0: confidence 0.92, wrong  -> bin 13
  //   row 2: {0.45, 0.55}, label 1: confidence 0.55, right  -> bin 8  (0.533, 0.600]
  //   row 3: {0.75, 0.25}, label 0: confidence 0.75, right  -> bin 11 (0.733, 0.800]
  // ECE = 2/4 |1/2 - 0.91| + 1/4 |1 - 0.55| + 1/4 |1 - 0.75| = 0.205 + 0.1125 + 0.0625 = 0.38.
  MemberResult a = Member("a", 0, {0.95f, 0.05f, 0.06f, 0.94f, 0.40f, 0.60f, 0.70f, 0.30f});
  MemberResult b = Member("b", 0, {0.85f, 0.15f, 0.10f, 0.90f, 0.50f, 0.50f, 0.80f, 0.20f});
  EnsembleSummary s = SummariseEnsemble({a, b}, {0.0f, 0.0f, 1.0f, 0.0f}, RunHead::Classification(2));
  CHECK(s.ensemble_accuracy == Approx(0.75));
  CHECK(s.figure("ece").value() == Approx(0.38).epsilon(1e-6));
  CHECK(s.ToJson()["ensemble_ece"].get<double>() == Approx(0.38).epsilon(1e-6));
  CHECK_FALSE(s.ToJson().contains("coverage_1sigma"));

  // Certain and right everywhere: confidence 1 is in the last bin, and the ECE is 0.
  EnsembleSummary sure =
      SummariseEnsemble({Member("m", 0, {1.0f, 0.0f, 0.0f, 1.0f})}, {0.0f, 1.0f}, RunHead::Classification(2));
  CHECK(sure.figure("ece").value() == Approx(0.0).margin(1e-12));
  // Certain and wrong everywhere: ECE 1.
  EnsembleSummary wrong =
      SummariseEnsemble({Member("m", 0, {1.0f, 0.0f, 0.0f, 1.0f})}, {1.0f, 0.0f}, RunHead::Classification(2));
  CHECK(wrong.figure("ece").value() == Approx(1.0));
}

TEST_CASE("Several targets: each target's ensemble RMSE, their mean, and the disagreement averaged", "[summary]") {
  // Two targets, rows of [t0, t1]: t0 is ThreeMembers' column, t1 is exact (error 0) but its
  // members disagree by +-2 on every row.
  const std::vector<float> y = {1, 10, 2, 20, 3, 30, 4, 40};
  std::vector<MemberResult> members = {Member("a", 0.5, {1, 8, 2, 18, 3, 28, 4, 38}),
                                       Member("b", 1.0, {2, 12, 2, 22, 3, 32, 6, 42}),
                                       Member("c", 1.5, {0, 10, 2, 20, 6, 30, 5, 40})};
  EnsembleSummary s = SummariseEnsemble(members, y, RunHead::Regression(2));
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
  EnsembleSummary s = SummariseEnsemble({a, b}, {0.0f, 1.0f}, RunHead::Classification(2));
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
  EnsembleSummary s = SummariseEnsemble({a, b}, {1.0f}, RunHead::Gaussian());
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
