// Tests of orchestrator/diverse_batch: uncertainty-weighted farthest-point selection.
#include "orchestrator/run/diverse_batch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "common/base/seed.h"

namespace ens {
namespace {

// A pool of 2-feature rows.
Table Pool(const std::vector<std::pair<float, float>>& rows) {
  Table t;
  t.features = 2;
  for (const auto& [a, b] : rows) {
    const float x[2] = {a, b};
    t.AppendRow(x, 0.0f);
  }
  return t;
}

std::vector<uint64_t> AllIds(const Table& t) {
  std::vector<uint64_t> ids(t.rows());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  return ids;
}

TEST_CASE("diverse takes one row of a cluster of near-duplicates and then a distant one, where top takes the cluster",
          "[mutation][diverse]") {
  // Rows 0-4: a tight cluster, the most uncertain; rows 5-6 far away, a little less uncertain.
  Table pool = Pool({{0, 0}, {0.01f, 0}, {0, 0.01f}, {0.01f, 0.01f}, {0.02f, 0}, {10, 10}, {-10, 10}});
  std::vector<double> score{1.0, 0.99, 0.98, 0.97, 0.96, 0.8, 0.7};
  std::vector<uint64_t> got = SelectDiverseBatch(pool, AllIds(pool), score, 3);
  // First the highest score; then the farthest weighted: row 5 (0.8 * far), then row 6.
  CHECK(got == std::vector<uint64_t>{0, 5, 6});
}

TEST_CASE("a far row with no uncertainty is not taken over an uncertain one", "[mutation][diverse]") {
  Table pool = Pool({{0, 0}, {5, 0}, {100, 0}});
  std::vector<double> score{1.0, 0.5, 0.0};
  CHECK(SelectDiverseBatch(pool, AllIds(pool), score, 2) == std::vector<uint64_t>{0, 1});
}

TEST_CASE("the selection depends on the candidates, not their order, and picks each row once", "[mutation][diverse]") {
  SeededRng rng(7);
  Table pool;
  pool.features = 3;
  std::vector<double> score;
  for (int r = 0; r < 2000; ++r) {
    const float x[3] = {static_cast<float>(rng.Below(1000)) / 7.0f, static_cast<float>(rng.Below(50)),
                        static_cast<float>(rng.Below(3))};
    pool.AppendRow(x, 0.0f);
    score.push_back(static_cast<double>(rng.Below(100)) / 100.0);
  }
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < pool.rows(); i += 2) ids.push_back(i);  // the even rows are unused
  std::vector<uint64_t> a = SelectDiverseBatch(pool, ids, score, 64);
  std::vector<uint64_t> shuffled = ids;
  for (size_t i = shuffled.size() - 1; i > 0; --i) std::swap(shuffled[i], shuffled[rng.Below(i + 1)]);
  CHECK(SelectDiverseBatch(pool, shuffled, score, 64) == a);
  CHECK(SelectDiverseBatch(pool, ids, score, 64) == a);  // and again
  REQUIRE(a.size() == 64);
  CHECK(std::set<uint64_t>(a.begin(), a.end()).size() == 64);
  for (uint64_t id : a) CHECK(id % 2 == 0);
  // The first pick is the highest score (the lowest id among equals).
  uint64_t best = ids[0];
  for (uint64_t id : ids)
    if (score[id] > score[best]) best = id;
  CHECK(a[0] == best);
}

// The selection as the header states it, one full pass per pick (no lazy bounds), for pools
// whose features are already standardised (mean 0, std 1 per column over the candidates: each
// column holds -1 and +1 equally often), so no rescaling is involved.
std::vector<uint64_t> FullPassReference(const Table& pool, const std::vector<double>& score, size_t k) {
  const size_t n = pool.rows(), f = static_cast<size_t>(pool.features);
  auto dist2 = [&](size_t a, size_t b) {
    float s = 0.0f;
    for (size_t c = 0; c < f; ++c) {
      const float d = pool.x[a * f + c] - pool.x[b * f + c];
      s += d * d;
    }
    return s;
  };
  std::vector<uint64_t> out;
  std::vector<bool> taken(n, false);
  for (size_t pick = 0; pick < std::min(k, n); ++pick) {
    size_t best = n;
    double best_key = -1;
    float best_d = -1;
    for (size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      float d = std::numeric_limits<float>::infinity();
      for (uint64_t p : out) d = std::min(d, dist2(i, p));
      const double key = out.empty() ? score[i] : score[i] * score[i] * static_cast<double>(d);
      if (key > best_key || (key == best_key && d > best_d)) best = i, best_key = key, best_d = d;
    }
    taken[best] = true;
    out.push_back(best);
  }
  return out;
}

TEST_CASE("the lazy selection picks what a full pass per pick picks, ties included", "[mutation][diverse]") {
  SeededRng rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    Table pool;
    pool.features = 4;
    std::vector<double> score;
    const int rows = 200 + 2 * static_cast<int>(rng.Below(200));
    for (int r = 0; r < rows; r += 2) {  // rows in +-1 pairs: every column mean 0, std 1
      float a[4], b[4];
      for (int c = 0; c < 4; ++c) {
        a[c] = rng.Below(2) ? 1.0f : -1.0f;
        b[c] = -a[c];
      }
      pool.AppendRow(a, 0.0f);
      pool.AppendRow(b, 0.0f);
      score.push_back(static_cast<double>(1 + rng.Below(4)));  // few values: many ties
      score.push_back(static_cast<double>(1 + rng.Below(4)));
    }
    INFO("trial " << trial << ", " << rows << " rows");
    CHECK(SelectDiverseBatch(pool, AllIds(pool), score, 40) == FullPassReference(pool, score, 40));
  }
}

TEST_CASE("k at or above the candidates takes them all - no candidates or k 0 takes none", "[mutation][diverse]") {
  Table pool = Pool({{0, 0}, {1, 1}, {1, 1}, {2, 2}});
  std::vector<double> score{0.1, 0.2, 0.2, 0.3};
  std::vector<uint64_t> all = SelectDiverseBatch(pool, AllIds(pool), score, 10);
  CHECK(std::set<uint64_t>(all.begin(), all.end()) == std::set<uint64_t>{0, 1, 2, 3});
  CHECK(all.size() == 4);  // the duplicate row too, once each
  CHECK(SelectDiverseBatch(pool, {}, score, 3).empty());
  CHECK(SelectDiverseBatch(pool, AllIds(pool), score, 0).empty());
}

TEST_CASE("with every score 0 the batch is spread out by distance alone - constant columns count for nothing",
          "[mutation][diverse]") {
  Table pool;
  pool.features = 2;
  for (int r = 0; r <= 10; ++r) {
    const float x[2] = {static_cast<float>(r), 42.0f};  // the second column is constant
    pool.AppendRow(x, 0.0f);
  }
  std::vector<double> zero(pool.rows(), 0.0);
  // Equal weights: row 0 first (lowest id), then the farthest (10), then the middle (5).
  CHECK(SelectDiverseBatch(pool, AllIds(pool), zero, 3) == std::vector<uint64_t>{0, 10, 5});
}

TEST_CASE("features are standardised: a column in large units does not decide alone", "[mutation][diverse]") {
  // Column 0 spans 0..1000, column 1 spans 0..1. Row 1 differs from row 0 only in column 0
  // (by a tenth of its range), row 2 only in column 1 (by all of its range).
  Table pool = Pool({{0, 0}, {100, 0}, {0, 1}, {1000, 0.5f}});
  std::vector<double> score{1.0, 0.5, 0.5, 0.01};
  std::vector<uint64_t> got = SelectDiverseBatch(pool, AllIds(pool), score, 2);
  CHECK(got == std::vector<uint64_t>{0, 2});
}

}  // namespace
}  // namespace ens
