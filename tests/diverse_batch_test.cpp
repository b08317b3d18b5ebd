// Tests of orchestrator/diverse_batch: farthest-point selection within the most uncertain
// kShortlistFactor * k candidates.
#include "orchestrator/diverse_batch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "common/seed.h"

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
  // All 7 are shortlisted (4 * 3 >= 7). First the highest score; then the farthest: rows 5 and
  // 6 are as far from row 0, so the lower id, then row 6.
  CHECK(got == std::vector<uint64_t>{0, 5, 6});
}

TEST_CASE("a row outside the shortlist is never taken, however far", "[mutation][diverse]") {
  // k = 2: the shortlist is the 8 most uncertain rows, a tight cluster; row 8 is far away and
  // only a little less uncertain.
  Table pool = Pool({{0, 0}, {0.1f, 0}, {0.2f, 0}, {0.3f, 0}, {0, 0.1f}, {0, 0.2f}, {0, 0.3f}, {0.1f, 0.1f},
                     {1000, 1000}});
  std::vector<double> score{1.0, 0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92};
  static_assert(kShortlistFactor == 4, "the rows above are sized for a shortlist of 4 * k");
  const std::vector<uint64_t> got = SelectDiverseBatch(pool, AllIds(pool), score, 2);
  // Row 0 first; then the shortlisted row farthest from it: the two columns mirror each other
  // over the shortlist, so (0.3, 0) and (0, 0.3) are as far, and the lower id wins.
  CHECK(got == std::vector<uint64_t>{0, 3});
  // With a shortlist of all 9 rows (k = 3 -> 12), row 8 is the farthest and comes second.
  CHECK(SelectDiverseBatch(pool, AllIds(pool), score, 3)[1] == 8);
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

// The selection as the header states it, written plainly, for pools whose shortlisted rows are
// already standardised (mean 0, std 1 per column over the shortlist: each column holds -1 and
// +1 equally often), so no rescaling is involved: sort by score (the lower id among equals),
// keep 4k, then farthest-point from the first.
std::vector<uint64_t> Reference(const Table& pool, const std::vector<double>& score, size_t k) {
  const size_t f = static_cast<size_t>(pool.features);
  std::vector<uint64_t> order(pool.rows());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint64_t a, uint64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
  order.resize(std::min(order.size(), kShortlistFactor * k));
  auto dist2 = [&](uint64_t a, uint64_t b) {
    float s = 0.0f;
    for (size_t c = 0; c < f; ++c) {
      const float d = pool.x[a * f + c] - pool.x[b * f + c];
      s += d * d;
    }
    return s;
  };
  std::vector<uint64_t> out{order[0]};
  while (out.size() < std::min(k, order.size())) {
    uint64_t best = 0;
    float best_d = -1;
    for (uint64_t i : order) {
      if (std::find(out.begin(), out.end(), i) != out.end()) continue;
      float d = std::numeric_limits<float>::infinity();
      for (uint64_t p : out) d = std::min(d, dist2(i, p));
      if (d > best_d || (d == best_d && i < best)) best = i, best_d = d;
    }
    out.push_back(best);
  }
  return out;
}

TEST_CASE("the selection is farthest-point within the shortlist, ties included", "[mutation][diverse]") {
  SeededRng rng(11);
  const size_t k = 40;
  for (int trial = 0; trial < 20; ++trial) {
    Table pool;
    pool.features = 4;
    std::vector<double> score;
    // 4k shortlisted rows in +-1 pairs (every column mean 0, std 1 over them), scores 10-13
    // (few values: many ties), and less uncertain rows far away, which must change nothing.
    for (size_t r = 0; r < kShortlistFactor * k; r += 2) {
      float a[4], b[4];
      for (int c = 0; c < 4; ++c) {
        a[c] = rng.Below(2) ? 1.0f : -1.0f;
        b[c] = -a[c];
      }
      pool.AppendRow(a, 0.0f);
      pool.AppendRow(b, 0.0f);
      score.push_back(static_cast<double>(10 + rng.Below(4)));
      score.push_back(static_cast<double>(10 + rng.Below(4)));
    }
    for (int r = 0; r < 100; ++r) {
      const float far[4] = {static_cast<float>(50 + rng.Below(100)), 0, 0, static_cast<float>(rng.Below(100))};
      pool.AppendRow(far, 0.0f);
      score.push_back(static_cast<double>(rng.Below(10)));
    }
    INFO("trial " << trial);
    CHECK(SelectDiverseBatch(pool, AllIds(pool), score, k) == Reference(pool, score, k));
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
  // Column 0 spans 0..100, column 1 spans 0..1. Row 1 differs from row 0 only in column 0 (by
  // all of its range), row 2 only in column 1 (by all of its range); row 3 sits between.
  // Standardised, row 2 is the farther (column 1's std is smaller against its range); in raw
  // units row 1 would be, 100 against 1.
  Table pool = Pool({{0, 0}, {100, 0}, {0, 1}, {0, 0.5f}});
  std::vector<double> score{1.0, 0.5, 0.5, 0.4};
  CHECK(SelectDiverseBatch(pool, AllIds(pool), score, 2) == std::vector<uint64_t>{0, 2});
}

}  // namespace
}  // namespace ens
