// SigmaCalibration (common/scoring/sigma_calibration.h): the map sqrt(scale^2 sigma^2 + noise^2)
// fitted by Gaussian NLL recovers a known one, calibrated intervals cover what they claim where
// the raw ones under-cover, the reported figures are never scored on the rows their map was
// fitted on, and temperature scaling tames over-confident probabilities.
#include "common/scoring/sigma_calibration.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/base/seed.h"

namespace ens {
namespace {

// Errors drawn from N(0, scale^2 sigma^2 + noise^2) for sigmas uniform in [0.1, 2].
void Draw(double scale, double noise, size_t n, uint64_t seed, std::vector<double>* errors,
          std::vector<double>* sigmas) {
  SeededRng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const double s = 0.1 + 1.9 * rng.Uniform();
    sigmas->push_back(s);
    errors->push_back(rng.Normal() * std::sqrt(scale * scale * s * s + noise * noise));
  }
}

TEST_CASE("the fitted sigma map recovers the scale and the noise the errors were drawn with", "[calibration]") {
  std::vector<double> e, s;
  Draw(2.5, 0.7, 20000, 1, &e, &s);
  const SigmaMap m = FitSigmaMap(e, s, 1e-6);
  CHECK(m.scale == Approx(2.5).epsilon(0.03));
  CHECK(m.noise == Approx(0.7).epsilon(0.1));
  SECTION("already calibrated sigmas keep (about) the identity") {
    std::vector<double> e1, s1;
    Draw(1.0, 0.0, 20000, 2, &e1, &s1);
    const SigmaMap id = FitSigmaMap(e1, s1, 1e-6);
    CHECK(id.scale == Approx(1.0).epsilon(0.03));
    CHECK(id.noise < 0.1);
  }
}

TEST_CASE("calibrated intervals cover what they claim where the committee's raw ones under-cover",
          "[calibration]") {
  std::vector<double> e, s;
  Draw(2.5, 0.7, 4000, 3, &e, &s);
  const IntervalScore raw = ScoreIntervals(e, s, 1e-6);
  const IntervalScore cal = CrossFittedScore(e, s, 1e-6);
  CHECK(raw.coverage_1sigma < 0.45);
  CHECK(raw.coverage_2sigma < 0.75);
  CHECK(cal.coverage_1sigma >= 0.65);
  CHECK(cal.coverage_1sigma <= 0.71);
  CHECK(cal.coverage_2sigma >= 0.94);
  CHECK(cal.coverage_2sigma <= 0.965);
  CHECK(cal.gaussian_nll < raw.gaussian_nll);
  CHECK(cal.ice < 0.02);
  CHECK(raw.ice > 0.15);
  // The reliability curve is monotone and ends near 95 % once calibrated.
  for (int j = 1; j < kReliabilityLevels; ++j) CHECK(cal.observed[j] >= cal.observed[j - 1]);
  CHECK(cal.observed.back() == Approx(0.95).margin(0.015));
}

TEST_CASE("the reported calibration is never scored on the rows its map was fitted on", "[calibration]") {
  // Even rows err by 0.1 sigma, odd rows by 3 sigma: a map fitted on one half and scored on
  // the other covers badly; fitted and scored on the same rows it would look fine.
  std::vector<double> e, s;
  for (int i = 0; i < 400; ++i) {
    s.push_back(1.0);
    e.push_back(i % 2 == 0 ? 0.1 : 3.0);
  }
  const IntervalScore crossed = CrossFittedScore(e, s, 1e-6);
  const SigmaMap all = FitSigmaMap(e, s, 1e-6);
  std::vector<double> mapped;
  for (double x : s) mapped.push_back(all.Apply(x));
  const IntervalScore in_sample = ScoreIntervals(e, mapped, 1e-6);
  CHECK(in_sample.coverage_2sigma == Approx(1.0));
  CHECK(crossed.coverage_2sigma == Approx(0.5));  // fitted on the even rows, the odd rows fall outside
}

TEST_CASE("temperature scaling softens over-confident probabilities and lowers the ECE and NLL", "[calibration]") {
  // Labels drawn from p, reported as p sharpened (p^3, normalised): over-confident.
  SeededRng rng(9);
  std::vector<double> reported;
  std::vector<float> labels;
  for (int i = 0; i < 3000; ++i) {
    const double a = rng.Uniform() + 0.2, b = rng.Uniform() + 0.2, c = rng.Uniform() + 0.2, sum = a + b + c;
    const double p[3] = {a / sum, b / sum, c / sum};
    const double u = rng.Uniform();
    labels.push_back(u < p[0] ? 0.0f : u < p[0] + p[1] ? 1.0f : 2.0f);
    const double q = p[0] * p[0] * p[0] + p[1] * p[1] * p[1] + p[2] * p[2] * p[2];
    for (double x : p) reported.push_back(x * x * x / q);
  }
  const double t = FitTemperature(reported, labels, 3);
  CHECK(t == Approx(3.0).epsilon(0.15));
  const std::vector<double> tempered = CrossFittedTemper(reported, labels, 3);
  auto nll = [&](const std::vector<double>& p) {
    double sum = 0;
    for (size_t i = 0; i < labels.size(); ++i) sum -= std::log(p[i * 3 + static_cast<size_t>(labels[i])]);
    return sum / static_cast<double>(labels.size());
  };
  CHECK(nll(tempered) < nll(reported) - 0.05);
  // Tempering by 1 changes nothing.
  const std::vector<double> same = Temper(reported, 3, 1.0);
  for (size_t i = 0; i < same.size(); ++i) CHECK(same[i] == Approx(reported[i]).margin(1e-12));
}

TEST_CASE("the temperature's cross-fitting tempers each half by the temperature fitted on the other", "[calibration]") {
  // Even rows over-confident (reported p^3), odd rows honest (reported p): a temperature fitted
  // on the odd rows (~1) tempers the even ones, one fitted on the even rows (~3) the odd ones.
  // Fitted on the rows it tempers, the reported NLL would turn optimistic.
  SeededRng rng(21);
  std::vector<double> reported, even_p, odd_p;
  std::vector<float> labels, even_l, odd_l;
  for (int i = 0; i < 2000; ++i) {
    const double a = rng.Uniform() + 0.2, b = rng.Uniform() + 0.2, c = rng.Uniform() + 0.2, sum = a + b + c;
    const double p[3] = {a / sum, b / sum, c / sum};
    const double u = rng.Uniform();
    const float label = u < p[0] ? 0.0f : u < p[0] + p[1] ? 1.0f : 2.0f;
    const double q = p[0] * p[0] * p[0] + p[1] * p[1] * p[1] + p[2] * p[2] * p[2];
    labels.push_back(label);
    for (double x : p) reported.push_back(i % 2 == 0 ? x * x * x / q : x);
    std::vector<double>& half = i % 2 == 0 ? even_p : odd_p;
    for (int c3 = 0; c3 < 3; ++c3) half.push_back(reported[reported.size() - 3 + static_cast<size_t>(c3)]);
    (i % 2 == 0 ? even_l : odd_l).push_back(label);
  }
  const double t_even = FitTemperature(even_p, even_l, 3), t_odd = FitTemperature(odd_p, odd_l, 3);
  CAPTURE(t_even, t_odd);
  REQUIRE(t_even > 2.0);  // the halves want different temperatures, so the test can tell them apart
  REQUIRE(t_odd < 1.5);
  const std::vector<double> crossed = CrossFittedTemper(reported, labels, 3);
  const std::vector<double> by_odd = Temper(reported, 3, t_odd), by_even = Temper(reported, 3, t_even);
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t c = 0; c < 3; ++c) {
      CAPTURE(i, c);
      REQUIRE(crossed[i * 3 + c] == (i % 2 == 0 ? by_odd : by_even)[i * 3 + c]);
    }
}

}  // namespace
}  // namespace ens
