// Diverse batch benchmark (issue 33): SelectDiverseBatch of k = 256 rows from a pool of
// 1,000,000 rows x 32 features (uniform random features, scores from 8 simulated members'
// spread), against the top-k selection ("top", a partial sort) of the same scores, side by
// side in one process on one core. The goal: the diverse selection within 10 s.
// Also reports how spread out each batch is: the mean distance (standardised features) from
// each picked row to its nearest other pick.
// Prints a table and, last, one JSON line with every figure.
//
// Usage: diverse_batch [rows=1000000] [features=32] [k=256] [reps=3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "common/base/seed.h"
#include "common/base/table.h"
#include "orchestrator/run/diverse_batch.h"

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Mean over picks of the distance to the nearest other pick, features scaled to unit variance
// (uniform [0,1): std 1/sqrt(12)).
double MeanNearest(const ens::Table& pool, const std::vector<uint64_t>& ids) {
  const size_t f = static_cast<size_t>(pool.features);
  double total = 0;
  for (uint64_t a : ids) {
    double best = std::numeric_limits<double>::infinity();
    for (uint64_t b : ids) {
      if (a == b) continue;
      double d2 = 0;
      for (size_t c = 0; c < f; ++c) {
        const double d = (pool.x[a * f + c] - pool.x[b * f + c]) * std::sqrt(12.0);
        d2 += d * d;
      }
      best = std::min(best, d2);
    }
    total += std::sqrt(best);
  }
  return total / static_cast<double>(ids.size());
}

}  // namespace

int main(int argc, char** argv) {
  const size_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const int features = argc > 2 ? std::atoi(argv[2]) : 32;
  const size_t k = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 256;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  ens::SeededRng rng(20261204);
  ens::Table pool;
  pool.features = features;
  pool.x.resize(rows * static_cast<size_t>(features));
  pool.y.assign(rows, 0.0f);
  for (float& v : pool.x) v = static_cast<float>(rng.Uniform());
  // The population std of 8 members' predictions, each the row's first feature plus noise.
  std::vector<double> score(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0, sq = 0;
    for (int m = 0; m < 8; ++m) {
      const double p = pool.x[r * static_cast<size_t>(features)] + 0.1 * rng.Normal();
      s += p;
      sq += p * p;
    }
    score[r] = std::sqrt(std::max(0.0, sq / 8 - (s / 8) * (s / 8)));
  }
  std::vector<uint64_t> ids(rows);
  for (size_t i = 0; i < rows; ++i) ids[i] = i;

  double diverse_best = 1e300, top_best = 1e300;
  std::vector<uint64_t> diverse, top;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = Clock::now();
    diverse = ens::SelectDiverseBatch(pool, ids, score, k);
    auto t1 = Clock::now();
    std::vector<uint64_t> all = ids;
    std::partial_sort(all.begin(), all.begin() + static_cast<long>(k), all.end(),
                      [&](uint64_t a, uint64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
    top.assign(all.begin(), all.begin() + static_cast<long>(k));
    auto t2 = Clock::now();
    diverse_best = std::min(diverse_best, Seconds(t0, t1));
    top_best = std::min(top_best, Seconds(t1, t2));
    std::printf("rep %d: diverse %.3f s, top %.3f s\n", rep + 1, Seconds(t0, t1), Seconds(t1, t2));
  }
  double mean_score_d = 0, mean_score_t = 0;
  for (size_t i = 0; i < k; ++i) mean_score_d += score[diverse[i]] / static_cast<double>(k);
  for (size_t i = 0; i < k; ++i) mean_score_t += score[top[i]] / static_cast<double>(k);
  const double near_d = MeanNearest(pool, diverse), near_t = MeanNearest(pool, top);
  std::printf("\n%zu rows x %d features, k = %zu, best of %d, one core\n", rows, features, k, reps);
  std::printf("| batch | seconds | mean score of the batch | mean distance to the nearest other pick |\n");
  std::printf("| --- | --- | --- | --- |\n");
  std::printf("| top | %.3f | %.4f | %.3f |\n", top_best, mean_score_t, near_t);
  std::printf("| diverse | %.3f | %.4f | %.3f |\n", diverse_best, mean_score_d, near_d);
  std::printf("diverse / 10 s goal: %.3f; diverse / top time: %.1f; spread diverse / top: %.2f\n", diverse_best / 10.0,
              diverse_best / top_best, near_d / near_t);
  std::printf("JSON {\"rows\": %zu, \"features\": %d, \"k\": %zu, \"reps\": %d, \"diverse_s\": %.4f, \"top_s\": %.4f, "
              "\"diverse_mean_score\": %.5f, \"top_mean_score\": %.5f, \"diverse_mean_nearest\": %.4f, "
              "\"top_mean_nearest\": %.4f}\n",
              rows, features, k, reps, diverse_best, top_best, mean_score_d, mean_score_t, near_d, near_t);
  return 0;
}
