#include "common/scoring/committee_score.h"

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

namespace {

// sqrt(E[p^2] - E[p]^2) of output column c of row r over the committee (>= 0 up to rounding).
double Spread(const std::vector<const std::vector<float>*>& preds, const std::vector<double>& mean, size_t at) {
  double sq = 0;
  for (const auto* p : preds) sq += static_cast<double>((*p)[at]) * (*p)[at];
  return std::sqrt(std::max(0.0, sq / static_cast<double>(preds.size()) - mean[at] * mean[at]));
}

// Each row's entropy of the mean; with `bald`, less the members' mean entropy (>= 0 up to
// rounding, Jensen).
std::vector<double> Entropies(const std::vector<const std::vector<float>*>& preds, const std::vector<double>& mean,
                              int width, bool bald) {
  const size_t w = static_cast<size_t>(width), rows = mean.size() / w;
  std::vector<double> out(rows, 0.0), member(w);
  for (size_t r = 0; r < rows; ++r) {
    out[r] = Entropy(&mean[r * w], width);
    if (!bald) continue;
    double mean_entropy = 0;
    for (const auto* p : preds) {
      for (size_t c = 0; c < w; ++c) member[c] = (*p)[r * w + c];
      mean_entropy += Entropy(member.data(), width);
    }
    out[r] = std::max(0.0, out[r] - mean_entropy / static_cast<double>(preds.size()));
  }
  return out;
}

}  // namespace

std::vector<double> CommitteeScores(CommitteeScore score, const std::vector<const std::vector<float>*>& preds,
                                    int width) {
  const size_t w = static_cast<size_t>(width), rows = preds[0]->size() / w;
  std::vector<double> mean = MeanPrediction(preds), out(rows, 0.0);
  switch (score) {  // every score named: a new one does not compile until it is computed here
    case CommitteeScore::kEpistemic:  // the spread of a Gaussian head's means (column 0)
      for (size_t r = 0; r < rows; ++r) out[r] = Spread(preds, mean, r * w);
      return out;
    case CommitteeScore::kStd:  // the mean over output columns of each column's spread
      for (size_t r = 0; r < rows; ++r) {
        double total = 0;
        for (size_t c = 0; c < w; ++c) total += Spread(preds, mean, r * w + c);
        out[r] = total / static_cast<double>(w);
      }
      return out;
    case CommitteeScore::kEntropy:
      return Entropies(preds, mean, width, /*bald=*/false);
    case CommitteeScore::kBald:
      return Entropies(preds, mean, width, /*bald=*/true);
  }
  return out;  // not reached: the switch names every score
}

}  // namespace ens
