#include "worker/kernels/holdout_metrics.h"

#include <algorithm>
#include <cmath>

namespace ens {
namespace {

// Several targets (rows x targets): holdout_rmse and holdout_mae are the means over the
// targets of each target's, which holdout_rmse_per_target and holdout_mae_per_target list.
nlohmann::json TargetsMetrics(const float* holdout, uint64_t rows, size_t f, size_t w, const std::vector<float>& pred) {
  const double hn = std::max<double>(1.0, static_cast<double>(rows));
  std::vector<double> se(w, 0.0), ae(w, 0.0), rmse(w), mae(w);
  for (uint64_t i = 0; i < rows; ++i)
    for (size_t t = 0; t < w; ++t) {
      const double d = static_cast<double>(pred[i * w + t]) - holdout[i * (f + w) + f + t];
      se[t] += d * d, ae[t] += std::abs(d);
    }
  double rmse_mean = 0, mae_mean = 0;
  for (size_t t = 0; t < w; ++t) {
    rmse[t] = std::sqrt(se[t] / hn), mae[t] = ae[t] / hn;
    rmse_mean += rmse[t] / static_cast<double>(w), mae_mean += mae[t] / static_cast<double>(w);
  }
  return {{"holdout_rmse", rmse_mean}, {"holdout_mae", mae_mean},
          {"holdout_rmse_per_target", rmse}, {"holdout_mae_per_target", mae}};
}

}  // namespace

nlohmann::json HoldoutMetrics(const RunHead& head, const float* holdout, uint64_t rows, int features,
                              const std::vector<float>& pred) {
  if (head.targets() > 1)
    return TargetsMetrics(holdout, rows, static_cast<size_t>(features), static_cast<size_t>(head.targets()), pred);
  const int f = features, classes = head.classes();
  const bool gaussian = head.gaussian();
  const double hn = std::max<double>(1.0, static_cast<double>(rows));
  double a = 0, b = 0, c = 0;
  for (uint64_t i = 0; i < rows; ++i) {
    const float y = holdout[i * (f + 1) + f];
    if (!head.classification()) {
      const double d = (gaussian ? pred[2 * i] : pred[i]) - y;
      a += d * d, b += std::abs(d);
      if (gaussian) c += 0.5 * (std::log(2 * M_PI * pred[2 * i + 1]) + d * d / pred[2 * i + 1]);
      continue;
    }
    const float* p = &pred[i * classes];
    const int label = static_cast<int>(y);
    a += std::max_element(p, p + classes) - p == label ? 1.0 : 0.0;
    b -= std::log(std::max(static_cast<double>(p[label]), 1e-12));
    for (int k = 0; k < classes; ++k) c += (p[k] - (k == label)) * (p[k] - (k == label));
  }
  switch (head.kind()) {
    case RunHead::Kind::kGaussian:
      return {{"holdout_rmse", std::sqrt(a / hn)}, {"holdout_mae", b / hn}, {"holdout_nll", c / hn}};
    case RunHead::Kind::kRegression: return {{"holdout_rmse", std::sqrt(a / hn)}, {"holdout_mae", b / hn}};
    case RunHead::Kind::kClassification: break;
  }
  return {{"holdout_accuracy", a / hn}, {"holdout_nll", b / hn}, {"holdout_brier", c / hn}};
}

}  // namespace ens
