#include "orchestrator/diverse_batch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ens {
namespace {

// Squared distance of two standardised rows, summed over the features in order (the same
// bits wherever it is computed).
float Dist2(const float* a, const float* b, size_t features) {
  float s = 0.0f;
  for (size_t c = 0; c < features; ++c) {
    const float d = a[c] - b[c];
    s += d * d;
  }
  return s;
}

// The rows of `ids` as standardised features, row-major, and how many columns are left
// (constant columns are dropped).
std::vector<float> Standardised(const Table& pool, const std::vector<uint64_t>& ids, size_t* columns) {
  const size_t n = ids.size(), f_all = static_cast<size_t>(pool.features);
  std::vector<size_t> cols;
  std::vector<double> mean, inv_std;
  for (size_t f = 0; f < f_all; ++f) {
    double s = 0, sq = 0;
    for (uint64_t id : ids) s += pool.x[id * f_all + f];
    const double m = s / static_cast<double>(n);
    for (uint64_t id : ids) {
      const double d = pool.x[id * f_all + f] - m;
      sq += d * d;
    }
    const double sd = std::sqrt(sq / static_cast<double>(n));
    if (sd > 0) {
      cols.push_back(f);
      mean.push_back(m);
      inv_std.push_back(1.0 / sd);
    }
  }
  const size_t F = cols.size();
  std::vector<float> z(n * F);
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < F; ++c)
      z[i * F + c] = static_cast<float>((pool.x[ids[i] * f_all + cols[c]] - mean[c]) * inv_std[c]);
  *columns = F;
  return z;
}

}  // namespace

std::vector<uint64_t> SelectDiverseBatch(const Table& pool, std::vector<uint64_t> candidates,
                                         const std::vector<double>& score, size_t k) {
  k = std::min(k, candidates.size());
  std::vector<uint64_t> picked;
  if (k == 0) return picked;
  // 1. The shortlist, most uncertain first (the lower id among equals): a total order, so the
  //    candidates' order does not matter.
  const size_t m = std::min(candidates.size(), k * kShortlistFactor);
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(m), candidates.end(),
                    [&](uint64_t a, uint64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
  candidates.resize(m);
  // 2. Farthest-point selection within it. The candidates are now in score order, so the
  //    first is the highest score; mind[i] is row i's squared distance to its nearest pick.
  size_t F = 0;
  const std::vector<float> z = Standardised(pool, candidates, &F);
  std::vector<float> mind(m, std::numeric_limits<float>::infinity());
  std::vector<bool> taken(m, false);
  size_t next = 0;
  while (picked.size() < k) {
    taken[next] = true;
    picked.push_back(candidates[next]);
    size_t best = m;
    for (size_t i = 0; i < m; ++i) {
      if (taken[i]) continue;
      mind[i] = std::min(mind[i], Dist2(&z[i * F], &z[next * F], F));
      if (best == m || mind[i] > mind[best] || (mind[i] == mind[best] && candidates[i] < candidates[best])) best = i;
    }
    next = best;
  }
  return picked;
}

}  // namespace ens
