#include "orchestrator/run/ensemble_summary.h"

#include <algorithm>
#include <cmath>

#include "common/scoring/committee_score.h"

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

// One target's errors (y - ensemble mean) and the ensemble's sigmas over the holdout rows.
struct TargetErrors {
  std::vector<double> errors, sigmas;
  void Add(double error, double sigma) {
    errors.push_back(error);
    sigmas.push_back(sigma);
  }
};

// Fills the calibration figures (ensemble_summary.h "Calibration", sigma_calibration.h) from one
// TargetErrors per target: raw, cross-fitted calibrated, and the map each target keeps.
void SetCalibration(const std::vector<TargetErrors>& targets, EnsembleSummary* s) {
  const double w = static_cast<double>(targets.size());
  s->calibrated = true;
  s->reliability_raw.fill(0.0);
  s->reliability_calibrated.fill(0.0);
  // Each figure the mean over targets, summed in target order.
  auto add = [s](RoundFigureName name, double v) { s->figures[name.index] = s->figures[name.index].value_or(0.0) + v; };
  for (const TargetErrors& t : targets) {
    const IntervalScore raw = ScoreIntervals(t.errors, t.sigmas, kCalibrationSigmaFloor);
    const IntervalScore cal = CrossFittedScore(t.errors, t.sigmas, kCalibrationSigmaFloor);
    s->sigma_maps.push_back(FitSigmaMap(t.errors, t.sigmas, kCalibrationSigmaFloor));
    add("coverage_1sigma", raw.coverage_1sigma / w);
    add("coverage_2sigma", raw.coverage_2sigma / w);
    add("holdout_nll", raw.gaussian_nll / w);
    add("ice", raw.ice / w);
    add("calibrated_coverage_1sigma", cal.coverage_1sigma / w);
    add("calibrated_coverage_2sigma", cal.coverage_2sigma / w);
    add("calibrated_nll", cal.gaussian_nll / w);
    add("calibrated_ice", cal.ice / w);
    for (int j = 0; j < kReliabilityLevels; ++j) {
      s->reliability_raw[j] += raw.observed[j] / w;
      s->reliability_calibrated[j] += cal.observed[j] / w;
    }
    if (targets.size() < 2) continue;
    s->coverage_1sigma_per_target.push_back(raw.coverage_1sigma);
    s->coverage_2sigma_per_target.push_back(raw.coverage_2sigma);
    s->ensemble_gaussian_nll_per_target.push_back(raw.gaussian_nll);
  }
}

// Expected calibration error of mean probabilities [rows x classes] (ensemble_summary.h).
double ExpectedCalibrationError(const std::vector<double>& mean, const std::vector<float>& labels, size_t classes) {
  std::vector<double> count(kCalibrationBins, 0.0), confidence(kCalibrationBins, 0.0), right(kCalibrationBins, 0.0);
  for (size_t i = 0; i < labels.size(); ++i) {
    const double* p = &mean[i * classes];
    const double* top = std::max_element(p, p + classes);
    // Bin b holds (b/15, (b+1)/15]: ceil(conf * 15) - 1, with 0 in the first bin.
    const int bin = std::clamp(static_cast<int>(std::ceil(*top * kCalibrationBins)) - 1, 0, kCalibrationBins - 1);
    count[bin] += 1;
    confidence[bin] += *top;
    right[bin] += static_cast<size_t>(top - p) == static_cast<size_t>(labels[i]) ? 1 : 0;
  }
  double ece = 0;
  for (int b = 0; b < kCalibrationBins; ++b)
    if (count[b] > 0) ece += std::abs(right[b] - confidence[b]);  // (n_b / n) |acc_b - conf_b| times n
  return labels.empty() ? 0.0 : ece / static_cast<double>(labels.size());
}

}  // namespace

nlohmann::json EnsembleSummary::ToJson() const {
  auto calibration = [this](nlohmann::json j) {
    WriteRoundFigures(figures, /*classification=*/false, &j);
    if (!calibrated) return j;
    nlohmann::json maps = nlohmann::json::array();
    for (const SigmaMap& m : sigma_maps) maps.push_back({{"scale", m.scale}, {"noise", m.noise}});
    j["sigma_calibration"] = maps;
    j["reliability"] = {{"nominal", kReliabilityNominal}, {"raw", reliability_raw}, {"calibrated", reliability_calibrated}};
    if (!coverage_1sigma_per_target.empty()) {
      j["coverage_1sigma_per_target"] = coverage_1sigma_per_target;
      j["coverage_2sigma_per_target"] = coverage_2sigma_per_target;
      j["ensemble_gaussian_nll_per_target"] = ensemble_gaussian_nll_per_target;
    }
    return j;
  };
  if (gaussian)
    return calibration({{"members", members},
                        {"member_rmse_mean", member_rmse_mean},
                        {"member_rmse_std", member_rmse_std},
                        {"member_nll_mean", member_nll_mean},
                        {"ensemble_rmse", ensemble_rmse},
                        {"ensemble_nll", ensemble_nll},
                        {"mean_aleatoric_std", mean_aleatoric_std},
                        {"mean_epistemic_std", mean_epistemic_std},
                        {"ensemble_error", ensemble_error},
                        {"mean_disagreement", mean_disagreement}});
  if (classes == 0) {
    nlohmann::json j = {{"members", members},
                        {"member_rmse_mean", member_rmse_mean},
                        {"member_rmse_std", member_rmse_std},
                        {"ensemble_rmse", ensemble_rmse},
                        {"ensemble_error", ensemble_error},
                        {"mean_disagreement", mean_disagreement}};
    if (!ensemble_rmse_per_target.empty()) j["ensemble_rmse_per_target"] = ensemble_rmse_per_target;
    return calibration(std::move(j));
  }
  nlohmann::json j = {{"members", members},
                      {"classes", classes},
                      {"member_accuracy_mean", member_accuracy_mean},
                      {"member_accuracy_std", member_accuracy_std},
                      {"ensemble_accuracy", ensemble_accuracy},
                      {"ensemble_nll", ensemble_nll},
                      {"ensemble_brier", ensemble_brier},
                      {"temperature", temperature},
                      {"ensemble_error", ensemble_error},
                      {"mean_disagreement", mean_disagreement}};
  WriteRoundFigures(figures, /*classification=*/true, &j);
  return j;
}

namespace {

// Gaussian members (holdout_pred: mean and variance per row): the mixture's RMSE, NLL and
// calibration, and the mean aleatoric and epistemic std. `n`: the rows, at least 1.
void SummariseGaussian(const std::vector<MemberResult>& results, const std::vector<const std::vector<float>*>& preds,
                       const std::vector<double>& mean, const std::vector<float>& holdout_y, double n,
                       EnsembleSummary* s) {
  std::tie(s->member_rmse_mean, s->member_rmse_std) = MeanStd(results, "holdout_rmse");
  s->member_nll_mean = MeanStd(results, "holdout_nll").first;
  const double m = static_cast<double>(preds.size());
  double se = 0, nll = 0, alea = 0, epi = 0;
  std::vector<TargetErrors> calibration(1);
  std::vector<double> log_density(preds.size());
  for (size_t i = 0; i < holdout_y.size(); ++i) {
    const double mu = mean[2 * i], y = holdout_y[i];
    double spread = 0;
    for (size_t k = 0; k < preds.size(); ++k) {
      const double mu_k = (*preds[k])[2 * i], var_k = (*preds[k])[2 * i + 1];
      spread += (mu_k - mu) * (mu_k - mu);
      log_density[k] = -0.5 * (std::log(2 * M_PI * var_k) + (y - mu_k) * (y - mu_k) / var_k);
    }
    const double top = *std::max_element(log_density.begin(), log_density.end());
    double sum = 0;
    for (double l : log_density) sum += std::exp(l - top);
    nll -= top + std::log(sum / m);  // log-sum-exp: far tails do not underflow
    se += (mu - y) * (mu - y);
    alea += std::sqrt(mean[2 * i + 1]);
    epi += std::sqrt(spread / m);
    calibration[0].Add(y - mu, std::sqrt(mean[2 * i + 1] + spread / m));  // the mixture's total std
  }
  SetCalibration(calibration, s);
  s->ensemble_rmse = s->ensemble_error = std::sqrt(se / n);
  s->ensemble_nll = nll / n;
  s->mean_aleatoric_std = alea / n;
  s->mean_epistemic_std = s->mean_disagreement = epi / n;
}

// Regression over `targets` values a row: the mean RMSE over targets (and each target's), the
// members' spread and, with more than one member, calibration.
void SummariseRegression(const std::vector<MemberResult>& results, const std::vector<const std::vector<float>*>& preds,
                         const std::vector<double>& mean, const std::vector<float>& holdout_y, int targets,
                         EnsembleSummary* s) {
  std::tie(s->member_rmse_mean, s->member_rmse_std) = MeanStd(results, "holdout_rmse");
  const size_t w = static_cast<size_t>(std::max(targets, 1)), rows = holdout_y.size() / w;
  const double nr = std::max<double>(1.0, static_cast<double>(rows));
  std::vector<double> spread = CommitteeScores(CommitteeScore::kStd, preds, static_cast<int>(w));
  std::vector<double> se(w, 0.0);
  std::vector<TargetErrors> calibration(w);
  double dis = 0;
  for (size_t i = 0; i < rows; ++i) {
    for (size_t t = 0; t < w; ++t) {
      const double e = mean[i * w + t] - holdout_y[i * w + t];
      se[t] += e * e;
      double var = 0;  // the members' population variance, as mean_disagreement's std
      for (const auto* p : preds) var += ((*p)[i * w + t] - mean[i * w + t]) * ((*p)[i * w + t] - mean[i * w + t]);
      calibration[t].Add(-e, std::sqrt(var / static_cast<double>(preds.size())));  // y - mean
    }
    dis += spread[i];
  }
  if (preds.size() > 1) SetCalibration(calibration, s);
  double rmse = 0;
  for (size_t t = 0; t < w; ++t) rmse += std::sqrt(se[t] / nr);
  s->ensemble_rmse = s->ensemble_error = rmse / static_cast<double>(w);
  if (w > 1)
    for (size_t t = 0; t < w; ++t) s->ensemble_rmse_per_target.push_back(std::sqrt(se[t] / nr));
  s->mean_disagreement = dis / nr;
}

// Classification (holdout_pred: `classes` probabilities a row): accuracy, NLL, Brier score and
// ECE of the mean probabilities, and the BALD disagreement. `n`: the rows, at least 1.
void SummariseClassification(const std::vector<MemberResult>& results,
                             const std::vector<const std::vector<float>*>& preds, const std::vector<double>& mean,
                             const std::vector<float>& holdout_y, int classes, double n, EnsembleSummary* s) {
  std::tie(s->member_accuracy_mean, s->member_accuracy_std) = MeanStd(results, "holdout_accuracy");
  std::vector<double> bald = CommitteeScores(CommitteeScore::kBald, preds, classes);
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
  s->ensemble_accuracy = hits / n;
  s->ensemble_error = 1.0 - s->ensemble_accuracy;
  s->ensemble_nll = nll / n;
  s->ensemble_brier = brier / n;
  s->figure("holdout_nll") = s->ensemble_nll;
  s->figure("ece") = ExpectedCalibrationError(mean, holdout_y, w);
  // Temperature scaling (sigma_calibration.h): the kept temperature from every row, the
  // reported figures cross-fitted.
  s->temperature = FitTemperature(mean, holdout_y, w);
  const std::vector<double> tempered = CrossFittedTemper(mean, holdout_y, w);
  s->figure("calibrated_ece") = ExpectedCalibrationError(tempered, holdout_y, w);
  double tempered_nll = 0;
  for (size_t i = 0; i < holdout_y.size(); ++i)
    tempered_nll -= std::log(std::max(tempered[i * w + static_cast<size_t>(holdout_y[i])], 1e-12));
  s->figure("calibrated_nll") = tempered_nll / n;
  s->mean_disagreement = dis / n;
}

}  // namespace

EnsembleSummary SummariseEnsemble(const std::vector<MemberResult>& results, const std::vector<float>& holdout_y,
                                  const RunHead& head) {
  EnsembleSummary s;
  s.members = static_cast<int>(results.size());
  s.classes = head.classes();
  s.gaussian = head.gaussian();
  if (results.empty()) return s;
  std::vector<const std::vector<float>*> preds;
  for (const auto& r : results) preds.push_back(&r.holdout_pred);
  const double n = std::max<double>(1.0, static_cast<double>(holdout_y.size()));
  const std::vector<double> mean = MeanPrediction(preds);
  switch (head.kind()) {
    case RunHead::Kind::kGaussian: SummariseGaussian(results, preds, mean, holdout_y, n, &s); break;
    case RunHead::Kind::kRegression: SummariseRegression(results, preds, mean, holdout_y, head.targets(), &s); break;
    case RunHead::Kind::kClassification:
      SummariseClassification(results, preds, mean, holdout_y, head.classes(), n, &s);
      break;
  }
  return s;
}

}  // namespace ens
