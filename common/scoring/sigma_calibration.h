// SigmaCalibration: the ensemble's uncertainty made to mean what it says (issue 49).
//
// A committee's spread under-covers: it sees the members' disagreement (epistemic), not the
// noise every member shares (aleatoric), and it shrinks on the rows the loop picked. The map
//   sigma_calibrated = sqrt(scale^2 sigma^2 + noise^2)
// (monotone in sigma: a scale on the spread plus a floor for the shared noise) is fitted per
// round and target by the Gaussian NLL of e = y - mean on rows no member trained on: the
// holdout. The figures a round reports for it are cross-fitted (fitted on the holdout's even
// rows and scored on its odd rows, and the other way round), so no figure is scored on a row
// its map was fitted on; the map the round keeps (for predict, export and the loop) is then
// fitted on every holdout row. Why the holdout and not the members' validation rows: a
// member's validation row is another member's training row, so the ensemble's error there is
// smaller than on new rows and a map fitted there would under-cover again.
// Classification: temperature scaling of the mean probabilities (p_c^(1/T), normalised), T by
// NLL, cross-fitted the same way.
// Interval calibration error (ICE): the mean over the nominal levels 5 %, 10 %, ..., 95 % of
// |observed coverage of the central interval mean +- z sigma - nominal|; the observed
// coverages are the reliability curve the status page plots.
// Pure functions. Thread-safe.
#pragma once

#include <array>
#include <vector>

#include <nlohmann/json.hpp>

namespace ens {

// The nominal levels of the reliability curve and ICE.
inline constexpr int kReliabilityLevels = 19;
inline constexpr std::array<double, kReliabilityLevels> kReliabilityNominal = {
    0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95};
// Their two-sided normal quantiles.
inline constexpr std::array<double, kReliabilityLevels> kReliabilityZ = {
    0.062707, 0.125661, 0.189118, 0.253347, 0.318639, 0.385320, 0.453762, 0.524401, 0.597760, 0.674490,
    0.755415, 0.841621, 0.934589, 1.036433, 1.150349, 1.281552, 1.439531, 1.644854, 1.959964};

// sigma -> sqrt(scale^2 sigma^2 + noise^2). The identity: scale 1, noise 0.
struct SigmaMap {
  double scale = 1.0, noise = 0.0;
  double Apply(double sigma) const;
};

// How well sigmas describe errors: coverage of +-1 and 2 sigma, mean Gaussian NLL, ICE and the
// reliability curve (observed coverage at each nominal level).
struct IntervalScore {
  double coverage_1sigma = 0, coverage_2sigma = 0, gaussian_nll = 0, ice = 0;
  std::array<double, kReliabilityLevels> observed{};
};

// The map minimising the mean Gaussian NLL of `errors` with sigmas mapped (sigma floored at
// `floor`). REQUIRES: errors.size() == sigmas.size() >= 1.
SigmaMap FitSigmaMap(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor);
IntervalScore ScoreIntervals(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor);
// The score of maps fitted on the other half (even rows / odd rows) of the rows. With fewer
// than 4 rows: ScoreIntervals of the map fitted on all of them.
IntervalScore CrossFittedScore(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor);

// Classification: mean probabilities [rows x classes] row-major, labels class indices.
double FitTemperature(const std::vector<double>& probs, const std::vector<float>& labels, size_t classes);
// Probabilities tempered by t: p_c^(1/t), normalised per row.
std::vector<double> Temper(const std::vector<double>& probs, size_t classes, double t);
// The tempered probabilities of each row under the temperature fitted on the other half.
std::vector<double> CrossFittedTemper(const std::vector<double>& probs, const std::vector<float>& labels,
                                      size_t classes);

}  // namespace ens
