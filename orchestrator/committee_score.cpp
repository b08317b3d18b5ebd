#include "orchestrator/committee_score.h"

#include <algorithm>
#include <cmath>

namespace ens {

std::vector<double> MeanPrediction(const std::vector<const std::vector<float>*>& preds) {
  std::vector<double> mean(preds.empty() ? 0 : preds[0]->size(), 0.0);
  for (const auto* p : preds)
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += (*p)[i];
  for (double& m : mean) m /= static_cast<double>(preds.size());
  return mean;
}

double Entropy(const double* p, int width) {
  double h = 0;
  for (int c = 0; c < width; ++c)
    if (p[c] > 0) h -= p[c] * std::log(p[c]);
  return h;
}

std::vector<double> CommitteeScores(CommitteeScore score, const std::vector<const std::vector<float>*>& preds,
                                    int width) {
  const size_t w = static_cast<size_t>(width), rows = preds[0]->size() / w;
  const double k = static_cast<double>(preds.size());
  std::vector<double> mean = MeanPrediction(preds), out(rows, 0.0);
  if (score == CommitteeScore::kEpistemic) {
    for (size_t r = 0; r < rows; ++r) {
      double sq = 0;
      for (const auto* p : preds) sq += static_cast<double>((*p)[r * w]) * (*p)[r * w];
      out[r] = std::sqrt(std::max(0.0, sq / k - mean[r * w] * mean[r * w]));
    }
    return out;
  }
  if (score == CommitteeScore::kStd) {
    for (size_t r = 0; r < rows; ++r) {
      double total = 0;
      for (size_t c = 0; c < w; ++c) {
        double sq = 0;
        for (const auto* p : preds) sq += static_cast<double>((*p)[r * w + c]) * (*p)[r * w + c];
        total += std::sqrt(std::max(0.0, sq / k - mean[r * w + c] * mean[r * w + c]));
      }
      out[r] = total / static_cast<double>(w);
    }
    return out;
  }
  std::vector<double> member(w);
  for (size_t r = 0; r < rows; ++r) {
    out[r] = Entropy(&mean[r * w], width);
    if (score != CommitteeScore::kBald) continue;  // kEntropy: the entropy of the mean alone
    double mean_entropy = 0;
    for (const auto* p : preds) {
      for (size_t c = 0; c < w; ++c) member[c] = (*p)[r * w + c];
      mean_entropy += Entropy(member.data(), width);
    }
    out[r] = std::max(0.0, out[r] - mean_entropy / k);  // >= 0 up to rounding (Jensen)
  }
  return out;
}

}  // namespace ens
