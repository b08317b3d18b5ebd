// Tests of worker/holdout_metrics: a member's holdout scores for each head against figures
// worked out by hand.
#include "worker/kernels/holdout_metrics.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace ens {
namespace {

TEST_CASE("holdout metrics: regression RMSE and MAE", "[holdout_metrics]") {
  // 2 rows of [x, y]: y = 1, 3; predictions 2, 3: errors 1, 0.
  const float holdout[] = {0.5f, 1.0f, 0.25f, 3.0f};
  auto m = HoldoutMetrics(RunHead::Regression(), holdout, 2, 1, {2.0f, 3.0f});
  CHECK(m["holdout_rmse"].get<double>() == Approx(std::sqrt(0.5)));
  CHECK(m["holdout_mae"].get<double>() == Approx(0.5));
  CHECK_FALSE(m.contains("holdout_nll"));
}

TEST_CASE("holdout metrics: several targets give per-target figures and their means", "[holdout_metrics]") {
  // 2 rows of [x, y0, y1]; predictions off by (1, 2) then (1, 0).
  const float holdout[] = {0, 0, 0, 0, 1, 1};
  auto m = HoldoutMetrics(RunHead::Regression(2), holdout, 2, 1, {1, 2, 2, 1});
  // target 0: errors 1, 1 -> rmse 1; target 1: errors 2, 0 -> rmse sqrt(2), mae 1
  CHECK(m["holdout_rmse_per_target"][0].get<double>() == Approx(1.0));
  CHECK(m["holdout_rmse_per_target"][1].get<double>() == Approx(std::sqrt(2.0)));
  CHECK(m["holdout_mae_per_target"][1].get<double>() == Approx(1.0));
  CHECK(m["holdout_rmse"].get<double>() == Approx((1.0 + std::sqrt(2.0)) / 2));
}

TEST_CASE("holdout metrics: a Gaussian head scores its means and its Gaussian NLL", "[holdout_metrics]") {
  // one row, y = 0, mean 1, variance 4: nll = 0.5 (log(2 pi 4) + 1/4)
  const float holdout[] = {7.0f, 0.0f};
  auto m = HoldoutMetrics(RunHead::Gaussian(), holdout, 1, 1, {1.0f, 4.0f});
  CHECK(m["holdout_rmse"].get<double>() == Approx(1.0));
  CHECK(m["holdout_nll"].get<double>() == Approx(0.5 * (std::log(2 * M_PI * 4) + 0.25)));
}

TEST_CASE("holdout metrics: classification accuracy, NLL and Brier score", "[holdout_metrics]") {
  // rows labelled 0 and 1; probabilities (0.8, 0.2) and (0.6, 0.4): one right, one wrong
  const float holdout[] = {0, 0, 0, 1};
  auto m = HoldoutMetrics(RunHead::Classification(2), holdout, 2, 1, {0.8f, 0.2f, 0.6f, 0.4f});
  CHECK(m["holdout_accuracy"].get<double>() == Approx(0.5));
  CHECK(m["holdout_nll"].get<double>() == Approx(-(std::log(0.8) + std::log(0.4)) / 2));
  // (0.2^2 + 0.2^2 + 0.6^2 + 0.6^2) / 2
  CHECK(m["holdout_brier"].get<double>() == Approx((0.08 + 0.72) / 2));
}

}  // namespace
}  // namespace ens
