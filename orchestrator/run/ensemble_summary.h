// EnsembleSummary: what a round's members say together, scored on the fixed holdout.
//
// Regression (classes == 0):
//   member_rmse_mean / member_rmse_std  holdout RMSE over members (std: sample, n-1; 0 for one)
//   ensemble_rmse                       RMSE of the members' mean prediction
//   mean_disagreement                   mean over holdout rows of the members' prediction std
// Several targets (targets > 1; predictions rows x targets): every RMSE is the mean over the
// targets of each target's RMSE (a member's holdout_rmse is that already), and
//   ensemble_rmse_per_target            each target's ensemble RMSE, in target order
//   mean_disagreement                   also averaged over the targets
// Classification (the ensemble predicts the members' mean probabilities):
//   member_accuracy_mean / _std         holdout accuracy over members
//   ensemble_accuracy, ensemble_nll, ensemble_brier   of the mean probabilities
//   mean_disagreement                   mean over holdout rows of BALD (committee_score.h)
// Gaussian heads (gaussian, predictions rows of [mean, variance]): the regression keys of the
// mixture's mean, and
//   member_nll_mean                     holdout Gaussian NLL over members
//   ensemble_nll                        holdout NLL of the mixture (1/M) sum_m N(y; mean_m, var_m)
//   mean_aleatoric_std / mean_epistemic_std   sqrt of the mean variance, std of the means
//   mean_disagreement                   mean epistemic std
// Both: ensemble_error, what rounds.stop_below_error compares: the RMSE, or 1 - accuracy.
//
// Calibration: does the ensemble's uncertainty mean what it says?
// Regression (plain with at least 2 members, several targets, Gaussian heads), per holdout row
// (and target) with e = y - ensemble mean and sigma the ensemble's std:
//   coverage_1sigma / coverage_2sigma   fraction of rows with |e| <= sigma / 2 sigma
//   ensemble_gaussian_nll               mean over rows of -log N(y; mean, sigma^2), the
//                                       Gaussian with the ensemble's mean and std (for Gaussian
//                                       heads this is the mixture's moment match, not
//                                       ensemble_nll, the mixture's own density)
//   sigma: plain regression, the members' population std (n, as mean_disagreement); Gaussian
//   heads, the mixture's total std sqrt(mean_m var_m + population variance of the mean_m).
//   sigma is floored at kCalibrationSigmaFloor (target units) for all three figures, so members
//   that agree exactly give a finite NLL (a hit within 1e-6 counts as covered). Absent for one
//   plain-regression member: it has no spread to judge.
//   Several targets: each per target (coverage_1sigma_per_target, coverage_2sigma_per_target,
//   ensemble_gaussian_nll_per_target, in target order); the plain keys are their means.
//   interval_calibration_error          ICE (sigma_calibration.h) of the raw sigma
//   calibrated_coverage_1sigma / _2sigma, calibrated_gaussian_nll, calibrated_interval_calibration_error
//                                       the same with sigma mapped by SigmaMap, cross-fitted
//                                       (fitted on one half of the holdout, scored on the other)
//   sigma_calibration                   [{"scale", "noise"}] per target: the map fitted on every
//                                       holdout row, applied by predict, export and the loop
//   reliability                         {"nominal", "raw", "calibrated"}: observed coverage of the
//                                       central intervals at 5 %, 10 %, ..., 95 % (means over targets)
// Classification:
//   ensemble_ece   expected calibration error of the mean probabilities: confidence = the
//                  highest mean probability, right = its class is the label (ties: the first,
//                  as accuracy); 15 equal-width bins (b/15, (b+1)/15] (0 goes in the first);
//                  sum over bins of (rows in bin / rows) |accuracy in bin - mean confidence|.
//   temperature    the temperature fitted on every holdout row (sigma_calibration.h)
//   calibrated_nll / calibrated_ece   of the tempered probabilities, cross-fitted
// Pure function. Thread-safe.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/state/member_result.h"
#include "common/config/run_head.h"
#include "common/scoring/sigma_calibration.h"
#include "orchestrator/service/round_figures.h"

namespace ens {

struct EnsembleSummary {
  int members = 0;
  int classes = 0;  // 0: regression
  double member_rmse_mean = 0, member_rmse_std = 0;
  double ensemble_rmse = 0;
  double member_accuracy_mean = 0, member_accuracy_std = 0;
  double ensemble_accuracy = 0, ensemble_nll = 0, ensemble_brier = 0;
  double ensemble_error = 0;
  double mean_disagreement = 0;
  bool gaussian = false;
  double member_nll_mean = 0, mean_aleatoric_std = 0, mean_epistemic_std = 0;  // ensemble_nll: above
  std::vector<double> ensemble_rmse_per_target;  // several targets only
  // The per-round figures of kRoundFigures (round_figures.h) this round has: a regression's
  // coverage, Gaussian NLL and ICE, raw and calibrated (cross-fitted on the holdout's halves); a
  // classifier's NLL and ECE, raw and tempered. ToJson writes each under its summary key.
  RoundFigureValues figures;
  std::optional<double>& figure(RoundFigureName name) { return figures[name.index]; }
  const std::optional<double>& figure(RoundFigureName name) const { return figures[name.index]; }
  bool calibrated = false;  // regression: the calibration figures, maps and curves are there
  std::vector<double> coverage_1sigma_per_target, coverage_2sigma_per_target,
      ensemble_gaussian_nll_per_target;  // several targets only
  // The maps (one per target) fitted on every holdout row: what predict, export and the loop apply.
  std::vector<SigmaMap> sigma_maps;
  std::array<double, kReliabilityLevels> reliability_raw{}, reliability_calibrated{};
  double temperature = 1;  // classification
  nlohmann::json ToJson() const;
};

// The least sigma the calibration figures use, in target units (a Gaussian head's variance
// is at least 1e-6 in standardised units, worker/train/objective.h).
inline constexpr double kCalibrationSigmaFloor = 1e-6;
// ensemble_ece's bins.
inline constexpr int kCalibrationBins = 15;

// How the members combine follows the head: the mean prediction (regression, per target), the
// mixture (Gaussian heads), the mean class probabilities (classification).
// REQUIRES: every result's holdout_pred has holdout rows x head.OutputWidth() values; holdout_y
// holds head.targets() values per row.
EnsembleSummary SummariseEnsemble(const std::vector<MemberResult>& results, const std::vector<float>& holdout_y,
                                  const RunHead& head = RunHead::Regression());

// SummaryError (the error stop_below_error compares): orchestrator/service/round_figures.h.

}  // namespace ens
