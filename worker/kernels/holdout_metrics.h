// HoldoutMetrics: a member's scores on the holdout, from its predictions, by the run's head
// (common/config/run_head.h). The keys are member_result.h's:
//   regression      holdout_rmse, holdout_mae; several targets: the means over the targets, and
//                   holdout_rmse_per_target, holdout_mae_per_target
//   gaussian        holdout_rmse, holdout_mae of the means, holdout_nll (rows of [mean, variance])
//   classification  holdout_accuracy, holdout_nll, holdout_brier (rows of class probabilities)
// Sums in double, in row order (the same bits for a member alone or in a pack). No libtorch. Pure.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/run_head.h"

namespace ens {

// holdout: `rows` rows of `features` values then head.targets() targets (a label for a
// classifier). REQUIRES: pred holds rows x head.OutputWidth() values.
nlohmann::json HoldoutMetrics(const RunHead& head, const float* holdout, uint64_t rows, int features,
                              const std::vector<float>& pred);

}  // namespace ens
