// DiverseBatch: k pool rows that are both uncertain and spread out (mutation.batch "diverse"),
// instead of the k most uncertain, which crowd into one region and label near-duplicates.
//
// Two steps, as in diverse mini-batch active learning (a shortlist by uncertainty, then
// diversity within it):
//   1. the shortlist: the kShortlistFactor * k candidates with the highest scores (ties: the
//      lower row id), all of them when there are fewer;
//   2. greedy farthest-point selection within the shortlist, in the space of the pool's input
//      features, each standardised over the shortlist (mean and population std; a constant
//      column is left out): the first pick is the shortlist's highest score, each next pick
//      the row farthest (Euclidean) from its nearest pick so far (ties: the lower row id).
// So every pick is among the most uncertain rows, and no two picks are near-duplicates while a
// farther uncertain row is left. Measured against weighting each row's distance by its score
// over the whole pool (the first version) on diamonds, digits and Friedman #1: BENCHMARKS.md.
// The space is the input features because they exist for every model kind (command members
// and TorchScript modules expose no hidden layer to the supervisor) and cost nothing to get.
//
// Pure and deterministic: the same candidates (in any order), scores and k give the same rows
// in the same order (float sums in a fixed order, no randomness), so a replayed or resumed
// round takes the same rows.
// Cost: a partial sort of the candidates by score, then k passes over the shortlist (O(k^2 *
// features * kShortlistFactor)). Memory: one float per shortlisted value. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/table.h"

namespace ens {

inline constexpr size_t kShortlistFactor = 4;

// `candidates`: pool row ids (unused rows), each < pool.rows(), no repeats;
// `score`: indexed by pool row id (>= 0). Returns min(k, candidates) ids, in the order picked.
std::vector<uint64_t> SelectDiverseBatch(const Table& pool, std::vector<uint64_t> candidates,
                                         const std::vector<double>& score, size_t k);

}  // namespace ens
