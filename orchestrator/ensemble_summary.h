// EnsembleSummary: what a round's members say together, scored on the fixed holdout.
//
//   member_rmse_mean / member_rmse_std  holdout RMSE over members (std: sample, n-1; 0 for one)
//   ensemble_rmse                       RMSE of the members' mean prediction
//   mean_disagreement                   mean over holdout rows of the members' prediction std
// Pure function. Thread-safe.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "common/member_result.h"

namespace ens {

struct EnsembleSummary {
  int members = 0;
  double member_rmse_mean = 0, member_rmse_std = 0;
  double ensemble_rmse = 0;
  double mean_disagreement = 0;
  nlohmann::json ToJson() const;
};

// REQUIRES: every result's holdout_pred has holdout_y.size() values.
EnsembleSummary SummariseEnsemble(const std::vector<MemberResult>& results,
                                  const std::vector<float>& holdout_y);

// Population std of the members' predictions for each row of `column` (holdout or pool).
std::vector<double> PredictionStd(const std::vector<const std::vector<float>*>& preds);

}  // namespace ens
