#include "orchestrator/ensemble_summary.h"

#include <algorithm>
#include <cmath>

#include "orchestrator/committee_score.h"

namespace ens {
namespace {

// Mean and sample std (n-1; 0 for one) of a member metric.
std::pair<double, double> MeanStd(const std::vector<MemberResult>& results, const char* key) {
  std::vector<double> v;
  for (const auto& r : results) v.push_back(r.metrics.value(key, 0.0));
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0.0};
}

}  // namespace

nlohmann::json EnsembleSummary::ToJson() const {
  if (classes == 0)
    return {{"members", members},
            {"member_rmse_mean", member_rmse_mean},
            {"member_rmse_std", member_rmse_std},
            {"ensemble_rmse", ensemble_rmse},
            {"ensemble_error", ensemble_error},
            {"mean_disagreement", mean_disagreement}};
  return {{"members", members},
          {"classes", classes},
          {"member_accuracy_mean", member_accuracy_mean},
          {"member_accuracy_std", member_accuracy_std},
          {"ensemble_accuracy", ensemble_accuracy},
          {"ensemble_nll", ensemble_nll},
          {"ensemble_brier", ensemble_brier},
          {"ensemble_error", ensemble_error},
          {"mean_disagreement", mean_disagreement}};
}

EnsembleSummary SummariseEnsemble(const std::vector<MemberResult>& results, const std::vector<float>& holdout_y,
                                  int classes) {
  EnsembleSummary s;
  s.members = static_cast<int>(results.size());
  s.classes = classes;
  if (results.empty()) return s;
  std::vector<const std::vector<float>*> preds;
  for (const auto& r : results) preds.push_back(&r.holdout_pred);
  const double n = std::max<double>(1.0, static_cast<double>(holdout_y.size()));
  const std::vector<double> mean = MeanPrediction(preds);
  if (classes == 0) {
    std::tie(s.member_rmse_mean, s.member_rmse_std) = MeanStd(results, "holdout_rmse");
    std::vector<double> spread = CommitteeScores("std", preds, 1);
    double se = 0, dis = 0;
    for (size_t i = 0; i < holdout_y.size(); ++i) {
      se += (mean[i] - holdout_y[i]) * (mean[i] - holdout_y[i]);
      dis += spread[i];
    }
    s.ensemble_rmse = s.ensemble_error = std::sqrt(se / n);
    s.mean_disagreement = dis / n;
    return s;
  }
  std::tie(s.member_accuracy_mean, s.member_accuracy_std) = MeanStd(results, "holdout_accuracy");
  std::vector<double> bald = CommitteeScores("bald", preds, classes);
  const size_t w = static_cast<size_t>(classes);
  double hits = 0, nll = 0, brier = 0, dis = 0;
  for (size_t i = 0; i < holdout_y.size(); ++i) {
    const double* p = &mean[i * w];
    const size_t label = static_cast<size_t>(holdout_y[i]);
    hits += static_cast<size_t>(std::max_element(p, p + w) - p) == label ? 1 : 0;
    nll -= std::log(std::max(p[label], 1e-12));
    for (size_t c = 0; c < w; ++c) brier += (p[c] - (c == label)) * (p[c] - (c == label));
    dis += bald[i];
  }
  s.ensemble_accuracy = hits / n;
  s.ensemble_error = 1.0 - s.ensemble_accuracy;
  s.ensemble_nll = nll / n;
  s.ensemble_brier = brier / n;
  s.mean_disagreement = dis / n;
  return s;
}

double SummaryError(const nlohmann::json& summary) {
  if (summary.contains("ensemble_error")) return summary.value("ensemble_error", INFINITY);
  return summary.value("ensemble_rmse", INFINITY);
}

}  // namespace ens
