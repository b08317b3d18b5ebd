// CommitteeScore: how much a round's members disagree on each row, from their predictions,
// for query by committee (mutation.score) and the round summary.
//
//   std      regression: the population std of the members' predictions; classification:
//            the mean over classes of the population std of the members' probabilities
//   entropy  classification: the entropy (nats) of the members' mean probabilities — all the
//            uncertainty the ensemble has, the data's own included
//   bald     classification: mutual information between the prediction and the member, the
//            entropy of the mean minus the mean of the members' entropies (Houlsby et al.'s
//            BALD) — the part the members disagree on
//   epistemic  Gaussian heads (rows of [mean, variance], width 2): the population std of the
//            members' means, the mixture's epistemic std (the variances, aleatoric, left out)
// A prediction array holds rows x width floats, row-major (width 1: regression; classes).
// Pure functions, in double, in member order. Thread-safe.
#pragma once

#include <vector>

#include "common/config/run_options.h"

namespace ens {

// REQUIRES: preds non-empty, each rows * width long.
std::vector<double> CommitteeScores(CommitteeScore score, const std::vector<const std::vector<float>*>& preds,
                                    int width);

// The members' mean of every value (rows x width, as the predictions).
std::vector<double> MeanPrediction(const std::vector<const std::vector<float>*>& preds);

// Entropy (nats) of one probability row; 0 log 0 = 0.
double Entropy(const double* p, int width);

}  // namespace ens
