#include "orchestrator/ensemble_summary.h"

#include <cmath>

namespace ens {

nlohmann::json EnsembleSummary::ToJson() const {
  return {{"members", members},
          {"member_rmse_mean", member_rmse_mean},
          {"member_rmse_std", member_rmse_std},
          {"ensemble_rmse", ensemble_rmse},
          {"mean_disagreement", mean_disagreement}};
}

std::vector<double> PredictionStd(const std::vector<const std::vector<float>*>& preds) {
  if (preds.empty()) return {};
  size_t n = preds[0]->size();
  std::vector<double> out(n, 0.0);
  double k = static_cast<double>(preds.size());
  for (size_t r = 0; r < n; ++r) {
    double sum = 0, sq = 0;
    for (const auto* p : preds) {
      sum += (*p)[r];
      sq += static_cast<double>((*p)[r]) * (*p)[r];
    }
    double mean = sum / k;
    out[r] = std::sqrt(std::max(0.0, sq / k - mean * mean));
  }
  return out;
}

EnsembleSummary SummariseEnsemble(const std::vector<MemberResult>& results,
                                  const std::vector<float>& holdout_y) {
  EnsembleSummary s;
  s.members = static_cast<int>(results.size());
  if (results.empty()) return s;
  std::vector<double> rmse;
  for (const auto& r : results) rmse.push_back(r.metrics.value("holdout_rmse", 0.0));
  double sum = 0;
  for (double v : rmse) sum += v;
  s.member_rmse_mean = sum / rmse.size();
  double var = 0;
  for (double v : rmse) var += (v - s.member_rmse_mean) * (v - s.member_rmse_mean);
  s.member_rmse_std = rmse.size() > 1 ? std::sqrt(var / (rmse.size() - 1)) : 0.0;

  std::vector<const std::vector<float>*> preds;
  for (const auto& r : results) preds.push_back(&r.holdout_pred);
  std::vector<double> spread = PredictionStd(preds);
  double se = 0, dis = 0;
  for (size_t i = 0; i < holdout_y.size(); ++i) {
    double mean = 0;
    for (const auto* p : preds) mean += (*p)[i];
    mean /= preds.size();
    se += (mean - holdout_y[i]) * (mean - holdout_y[i]);
    dis += spread[i];
  }
  double n = std::max<double>(1.0, static_cast<double>(holdout_y.size()));
  s.ensemble_rmse = std::sqrt(se / n);
  s.mean_disagreement = dis / n;
  return s;
}

}  // namespace ens
