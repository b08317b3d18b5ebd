// GenerateFriedman1 / Friedman1Target: the formula, the ranges, and seed determinism.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/data/data_source.h"

namespace ens {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("Friedman1Target follows the documented formula") {
  const float a[] = {0.5f, 1.0f, 0.5f, 0.0f, 0.0f};  // 10 sin(pi/2) = 10
  CHECK(Friedman1Target(a) == Approx(10.0f));
  const float b[] = {0.0f, 0.0f, 0.0f, 1.0f, 1.0f};  // 20 * 0.25 + 10 + 5
  CHECK(Friedman1Target(b) == Approx(20.0f));
  const float c[] = {0.2f, 0.3f, 0.9f, 0.4f, 0.7f, 123.0f};  // the sixth is a distractor
  const double want = 10 * std::sin(M_PI * 0.2 * 0.3) + 20 * 0.16 + 4.0 + 3.5;
  CHECK(Friedman1Target(c) == Approx(want).epsilon(1e-6));
}

TEST_CASE("GenerateFriedman1 shapes, names and ranges") {
  const Table t = GenerateFriedman1(500, 7, 1.0, 42);
  CHECK(t.features == 7);
  CHECK(t.rows() == 500);
  CHECK(t.x.size() == 500u * 7u);
  CHECK(t.target_names == std::vector<std::string>{"y"});
  CHECK(t.feature_names == std::vector<std::string>{"x0", "x1", "x2", "x3", "x4", "x5", "x6"});
  for (float v : t.x) {
    REQUIRE(v >= 0.0f);
    REQUIRE(v <= 1.0f);
  }
  float lo = 1.0f, hi = 0.0f;
  for (float v : t.x) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo < 0.01f);  // actually spread over [0, 1], not a constant
  CHECK(hi > 0.99f);
  for (float v : t.y) REQUIRE(std::isfinite(v));
}

TEST_CASE("GenerateFriedman1 is deterministic in the seed") {
  const Table a = GenerateFriedman1(100, 10, 1.0, 7);
  const Table b = GenerateFriedman1(100, 10, 1.0, 7);
  CHECK(SameBits(a.x, b.x));
  CHECK(SameBits(a.y, b.y));
  const Table c = GenerateFriedman1(100, 10, 1.0, 8);
  CHECK_FALSE(SameBits(a.x, c.x));
  CHECK_FALSE(SameBits(a.y, c.y));
}

TEST_CASE("GenerateFriedman1 without noise gives exactly the formula") {
  const Table t = GenerateFriedman1(200, 6, 0.0, 3);
  for (size_t r = 0; r < t.rows(); ++r) {
    REQUIRE(t.y[r] == Friedman1Target(&t.x[r * t.features]));
  }
}

TEST_CASE("GenerateFriedman1 noise is N(0, noise^2) on top of the same features") {
  const Table clean = GenerateFriedman1(4000, 5, 0.0, 11);
  const Table noisy = GenerateFriedman1(4000, 5, 2.0, 11);
  CHECK(SameBits(clean.x, noisy.x));  // the noise level does not move the features
  double sum = 0, sum2 = 0;
  for (size_t r = 0; r < noisy.rows(); ++r) {
    const double e = noisy.y[r] - clean.y[r];
    sum += e;
    sum2 += e * e;
  }
  const double n = static_cast<double>(noisy.rows());
  const double mean = sum / n;
  CHECK(std::abs(mean) < 0.15);  // ~4.7 standard errors
  CHECK(std::sqrt(sum2 / n - mean * mean) == Approx(2.0).epsilon(0.06));
}

TEST_CASE("GenerateFriedman1 with zero rows is an empty, well-formed table") {
  const Table t = GenerateFriedman1(0, 5, 1.0, 1);
  CHECK(t.rows() == 0);
  CHECK(t.x.empty());
  CHECK(t.features == 5);
  CHECK(t.feature_names.size() == 5);
}

}  // namespace
}  // namespace ens
