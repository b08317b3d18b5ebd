// Predictor: loads member checkpoints and predicts raw rows; compares checkpoints.
//
// Used by `ensemble-worker predict` (which `ensemblectl predict` runs) and by
// `ensemble-worker compare` (which `ensemblectl verify` runs), so ensemblectl itself never
// loads libtorch. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ens {

// Predictions of each checkpoint on `rows` (row-major [n, features]); result[member][row].
StatusOr<std::vector<std::vector<float>>> PredictWithCheckpoints(
    const std::vector<std::string>& checkpoints, const std::vector<float>& rows, int features);

// Compares every tensor of two checkpoints bit for bit. Result: {"equal": bool,
// "tensor": first differing name, "max_abs_diff": value} (tensor absent when equal).
StatusOr<nlohmann::json> CompareCheckpoints(const std::string& a, const std::string& b);

}  // namespace ens
