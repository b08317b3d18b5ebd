// DiverseBatch: k pool rows that are both uncertain and spread out (mutation.batch "diverse"),
// instead of the k most uncertain, which crowd into one region and label near-duplicates.
//
// Greedy, uncertainty-weighted farthest-point selection in the space of the pool's input
// features, each standardised (mean and population std over the candidate rows; a constant
// column is left out). The first pick is the highest-scoring row; each next pick maximises
//   score(row) * distance(row, the nearest row picked so far)      (Euclidean)
// so a near-duplicate of a pick scores ~0, and a far row needs some uncertainty to be taken.
// Ties: the larger distance, then the lower row id. When every score is 0 (nothing tells the
// rows apart, e.g. one member) the scores count as equal: plain farthest-point selection.
// The space is the input features because they exist for every model kind (command members
// and TorchScript modules expose no hidden layer to the supervisor) and cost nothing to get.
//
// Pure and deterministic: the same candidates (in any order), scores and k give the same rows
// in the same order (float sums in a fixed order, no randomness), so a replayed or resumed
// round takes the same rows.
// Cost: one pass over candidates x features to standardise and to measure every candidate
// against the first pick; after that lazy greedy (a candidate is measured against the newer
// picks only when its bound reaches the top of a heap), which picks exactly what a full pass
// per pick would. Memory: one float per candidate value. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/base/table.h"

namespace ens {

// `candidates`: pool row ids (unused rows), each < pool.rows(), no repeats, fewer than 2^32;
// `score`: indexed by pool row id (>= 0). Returns min(k, candidates) ids, in the order picked.
std::vector<uint64_t> SelectDiverseBatch(const Table& pool, std::vector<uint64_t> candidates,
                                         const std::vector<double>& score, size_t k);

}  // namespace ens
