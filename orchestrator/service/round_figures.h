// RoundFigures: what every reader of a round's summary (summary.json's "ensemble" object,
// orchestrator/run/ensemble_summary.h) shares below the run room: the table of per-round
// figures, the error stop_below_error compares, and the nominal levels of the reliability
// curve. Pure. Thread-safe.
//
// kRoundFigures is the one list of the optional per-round figures (calibration and the like):
// it drives RoundView (run_snapshot.h: read from a summary, written to and read from
// status.json), /metrics (prometheus_metrics.cpp: a gauge of the last committed round), the
// status page's and `ensemblectl status`'s round tables, and EnsembleSummary's figures
// (ensemble_summary.h), which summary.json is written from. A new figure is a row here and
// its computation in ensemble_summary.cpp (ARCHITECTURE.md "How to add ...").
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/scoring/sigma_calibration.h"  // kReliabilityLevels

namespace ens {

// One optional per-round figure.
struct RoundFigure {
  const char* key;                 // RoundView's and status.json's name
  const char* regression_key;      // its key in a regression run's summary ("" = none)
  const char* classification_key;  // its key in a classification run's summary ("" = none)
  const char* metric;              // its /metrics gauge (the last committed round)
  const char* help;                // ... and that gauge's HELP
  const char* html_header;         // its column on the status page ("" = none)
  const char* text_header;         // its column in `ensemblectl status` ("" = none)
};

inline constexpr RoundFigure kRoundFigures[] = {
    {"coverage_1sigma", "coverage_1sigma", "", "ensembled_round_coverage_1sigma",
     "Regression: fraction of holdout rows within the ensemble's mean +- 1 std (last committed round; several "
     "targets: the mean over targets).",
     "&plusmn;1&sigma; coverage", "cover 1sd"},
    {"coverage_2sigma", "coverage_2sigma", "", "ensembled_round_coverage_2sigma",
     "Regression: fraction of holdout rows within the ensemble's mean +- 2 std (last committed round).",
     "&plusmn;2&sigma; coverage", "cover 2sd"},
    {"holdout_nll", "ensemble_gaussian_nll", "ensemble_nll", "ensembled_round_holdout_nll",
     "Holdout NLL of the last committed round: regression, of the Gaussian with the ensemble's mean and std; "
     "classification, of the mean probabilities.",
     "NLL", "NLL"},
    {"ece", "", "ensemble_ece", "ensembled_round_ece",
     "Classification: expected calibration error (15 equal-width confidence bins) of the last committed round.",
     "ECE", "ECE"},
    {"calibrated_coverage_1sigma", "calibrated_coverage_1sigma", "", "ensembled_round_calibrated_coverage_1sigma",
     "Regression: fraction of holdout rows within mean +- 1 calibrated std (last committed round; the calibration "
     "fitted on the other half of the holdout).",
     "calibrated &plusmn;1&sigma;", "cal. 1sd"},
    {"calibrated_coverage_2sigma", "calibrated_coverage_2sigma", "", "ensembled_round_calibrated_coverage_2sigma",
     "Regression: fraction of holdout rows within mean +- 2 calibrated std (last committed round).",
     "calibrated &plusmn;2&sigma;", "cal. 2sd"},
    {"calibrated_nll", "calibrated_gaussian_nll", "calibrated_nll", "ensembled_round_calibrated_holdout_nll",
     "Holdout NLL after the last committed round's calibration: regression, of the Gaussian with the calibrated "
     "std; classification, of the temperature-scaled probabilities.",
     "calibrated NLL", "cal. NLL"},
    {"calibrated_ece", "", "calibrated_ece", "ensembled_round_calibrated_ece",
     "Classification: expected calibration error of the temperature-scaled probabilities (last committed round).",
     "calibrated ECE", "cal. ECE"},
    {"ice", "interval_calibration_error", "", "ensembled_round_interval_calibration_error",
     "Regression: mean |observed - nominal| coverage of the central intervals at 5 %, 10 %, ..., 95 % (last "
     "committed round, raw std).",
     "", ""},
    {"calibrated_ice", "calibrated_interval_calibration_error", "", "ensembled_round_calibrated_interval_calibration_error",
     "Regression: the interval calibration error with the calibrated std (last committed round).", "", ""},
};
inline constexpr size_t kRoundFigureCount = sizeof(kRoundFigures) / sizeof(kRoundFigures[0]);

// The index of the figure named `key` in kRoundFigures; kRoundFigureCount when there is none.
constexpr size_t RoundFigureIndex(std::string_view key) {
  for (size_t i = 0; i < kRoundFigureCount; ++i)
    if (key == kRoundFigures[i].key) return i;
  return kRoundFigureCount;
}

// A figure's name checked against kRoundFigures while the program compiles: a name it does
// not have stops the build.
struct RoundFigureName {
  size_t index;
  consteval RoundFigureName(const char* key) : index(RoundFigureIndex(key)) {
    if (index >= kRoundFigureCount) throw "not a round figure (kRoundFigures)";
  }
};

// The summary key of figure `f` for a run of that kind ("" when it has none).
inline const char* RoundFigureSummaryKey(const RoundFigure& f, bool classification) {
  return classification ? f.classification_key : f.regression_key;
}

// One value per row of kRoundFigures; absent where a round has no such figure (a kind of run
// without it, a one-member regression, a summary written before the figure existed).
using RoundFigureValues = std::array<std::optional<double>, kRoundFigureCount>;

// Writes every present figure into a summary's JSON under its key for that kind of run.
inline void WriteRoundFigures(const RoundFigureValues& values, bool classification, nlohmann::json* summary) {
  for (size_t i = 0; i < kRoundFigureCount; ++i) {
    const char* key = RoundFigureSummaryKey(kRoundFigures[i], classification);
    if (values[i] && *key != '\0') (*summary)[key] = *values[i];
  }
}

// The error stop_below_error compares in a summary's JSON (of any version): ensemble_error,
// else ensemble_rmse; INFINITY when neither is there.
inline double SummaryError(const nlohmann::json& summary) {
  if (summary.contains("ensemble_error")) return summary.value("ensemble_error", INFINITY);
  return summary.value("ensemble_rmse", INFINITY);
}

}  // namespace ens
