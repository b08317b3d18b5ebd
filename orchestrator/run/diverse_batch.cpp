#include "orchestrator/run/diverse_batch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

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

// A candidate's standing: key = weight^2 * mind (orders as weight * distance does, without a
// square root), mind its squared distance to the nearest pick it has been compared with.
struct Entry {
  double key;
  float mind;
  uint32_t index;  // into the sorted candidates
};
// The heap's order: the larger key, then the larger distance, then the lower index first.
struct Below {
  bool operator()(const Entry& a, const Entry& b) const {
    if (a.key != b.key) return a.key < b.key;
    if (a.mind != b.mind) return a.mind < b.mind;
    return a.index > b.index;
  }
};

}  // namespace

std::vector<uint64_t> SelectDiverseBatch(const Table& pool, std::vector<uint64_t> candidates,
                                         const std::vector<double>& score, size_t k) {
  std::sort(candidates.begin(), candidates.end());
  const size_t n = candidates.size(), f_all = static_cast<size_t>(pool.features);
  k = std::min(k, n);
  std::vector<uint64_t> picked;
  if (k == 0) return picked;

  // Standardisation over the candidates, in double; constant columns are dropped.
  std::vector<size_t> cols;
  std::vector<double> mean, inv_std;
  for (size_t f = 0; f < f_all; ++f) {
    double s = 0, sq = 0;
    for (uint64_t id : candidates) s += pool.x[id * f_all + f];
    const double m = s / static_cast<double>(n);
    for (uint64_t id : candidates) {
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
  std::vector<float> z(n * F);  // row-major, the candidates' order
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < F; ++c)
      z[i * F + c] = static_cast<float>((pool.x[candidates[i] * f_all + cols[c]] - mean[c]) * inv_std[c]);

  double top = 0;
  for (uint64_t id : candidates) top = std::max(top, score[id]);
  auto weight2 = [&](size_t i) { return top > 0 ? score[candidates[i]] * score[candidates[i]] : 1.0; };

  // First pick: the highest weight, the lower id among equals (every row is infinitely far).
  size_t first = 0;
  for (size_t i = 1; i < n; ++i)
    if (weight2(i) > weight2(first)) first = i;
  std::vector<uint32_t> pick_index{static_cast<uint32_t>(first)};
  picked.push_back(candidates[first]);

  // Lazy greedy: a candidate's mind only falls as picks are added, so an entry compared with
  // fewer picks than there are is an upper bound of its standing. The top entry, once brought
  // up to date, beats every other entry's bound, hence its true standing: it is the next pick,
  // exactly as a full pass over every candidate would choose it.
  std::vector<uint32_t> checked(n, 1);  // picks each candidate has been compared with
  std::vector<Entry> entries;
  entries.reserve(n - 1);
  for (size_t i = 0; i < n; ++i) {
    if (i == first) continue;
    const float d = Dist2(&z[i * F], &z[first * F], F);
    entries.push_back({weight2(i) * static_cast<double>(d), d, static_cast<uint32_t>(i)});
  }
  std::priority_queue<Entry, std::vector<Entry>, Below> heap(Below{}, std::move(entries));
  while (picked.size() < k) {
    Entry e = heap.top();
    heap.pop();
    const size_t i = e.index;
    if (checked[i] == pick_index.size()) {
      pick_index.push_back(e.index);
      picked.push_back(candidates[i]);
      continue;
    }
    for (size_t p = checked[i]; p < pick_index.size(); ++p)
      e.mind = std::min(e.mind, Dist2(&z[i * F], &z[size_t{pick_index[p]} * F], F));
    checked[i] = static_cast<uint32_t>(pick_index.size());
    e.key = weight2(i) * static_cast<double>(e.mind);
    heap.push(e);
  }
  return picked;
}

}  // namespace ens
