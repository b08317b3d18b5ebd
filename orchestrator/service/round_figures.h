// RoundFigures: what every reader of a round's summary (summary.json's "ensemble" object,
// orchestrator/run/ensemble_summary.h) shares below the run room: the error stop_below_error
// compares, and the nominal levels of the reliability curve. Pure. Thread-safe.
#pragma once

#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

namespace ens {

// The nominal levels of the reliability curve and ICE (sigma_calibration.h).
inline constexpr int kReliabilityLevels = 19;
inline constexpr std::array<double, kReliabilityLevels> kReliabilityNominal = {
    0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95};

// The error stop_below_error compares in a summary's JSON (of any version): ensemble_error,
// else ensemble_rmse; INFINITY when neither is there.
inline double SummaryError(const nlohmann::json& summary) {
  if (summary.contains("ensemble_error")) return summary.value("ensemble_error", INFINITY);
  return summary.value("ensemble_rmse", INFINITY);
}

}  // namespace ens
