#include "common/scoring/sigma_calibration.h"

#include <algorithm>
#include <cmath>

namespace ens {
namespace {

// The minimum of f on [lo, hi] by golden-section search (f unimodal there, or close).
template <class F>
double GoldenMin(F f, double lo, double hi, int iterations) {
  const double r = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi, c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < iterations; ++i) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - r * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + r * (b - a), fd = f(d);
    }
  }
  return fc < fd ? c : d;
}

std::vector<double> Floored(const std::vector<double>& sigmas, double floor) {
  std::vector<double> out(sigmas.size());
  for (size_t i = 0; i < sigmas.size(); ++i) out[i] = std::max(sigmas[i], floor);
  return out;
}

// Mean over rows of log(u s^2 + v) + e^2 / (u s^2 + v): twice the NLL less a constant.
double Objective(const std::vector<double>& e2, const std::vector<double>& s2, double u, double v) {
  double sum = 0;
  for (size_t i = 0; i < e2.size(); ++i) {
    const double var = std::max(u * s2[i] + v, 1e-300);
    sum += std::log(var) + e2[i] / var;
  }
  return sum / static_cast<double>(e2.size());
}

// The rows of `v` with index parity `odd`.
template <class T>
std::vector<T> Half(const std::vector<T>& v, bool odd, size_t width = 1) {
  std::vector<T> out;
  for (size_t i = odd ? 1 : 0; i * width < v.size(); i += 2) out.insert(out.end(), v.begin() + i * width, v.begin() + (i + 1) * width);
  return out;
}

double Nll(const std::vector<double>& probs, const std::vector<float>& labels, size_t classes) {
  double sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) sum -= std::log(std::max(probs[i * classes + static_cast<size_t>(labels[i])], 1e-12));
  return sum / std::max<double>(1.0, static_cast<double>(labels.size()));
}

}  // namespace

double SigmaMap::Apply(double sigma) const { return std::sqrt(scale * scale * sigma * sigma + noise * noise); }

SigmaMap FitSigmaMap(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor) {
  const std::vector<double> s = Floored(sigmas, floor);
  std::vector<double> e2(errors.size()), s2(s.size());
  double m2 = 0, ms2 = 0;
  for (size_t i = 0; i < errors.size(); ++i) {
    e2[i] = errors[i] * errors[i];
    s2[i] = s[i] * s[i];
    m2 += e2[i];
    ms2 += s2[i];
  }
  const double n = static_cast<double>(std::max<size_t>(1, errors.size()));
  m2 = std::max(m2 / n, 1e-24);
  ms2 = std::max(ms2 / n, 1e-24);
  // log u spans 1e-6 to 1e6 of the scale that alone would match the errors' second moment;
  // log v from almost nothing to ten times that moment.
  const double u0 = m2 / ms2;
  const double v_lo = std::log(m2 * 1e-12), v_hi = std::log(m2 * 10);
  auto best_v = [&](double log_u) {
    const double u = u0 * std::exp(log_u);
    return GoldenMin([&](double log_v) { return Objective(e2, s2, u, std::exp(log_v)); }, v_lo, v_hi, 60);
  };
  const double log_u = GoldenMin(
      [&](double lu) { return Objective(e2, s2, u0 * std::exp(lu), std::exp(best_v(lu))); }, std::log(1e-6),
      std::log(1e6), 60);
  const double u = u0 * std::exp(log_u), v = std::exp(best_v(log_u));
  // With no noise left to explain (v at the bottom of its range) the floor is 0.
  return {std::sqrt(u), v <= m2 * 1e-11 ? 0.0 : std::sqrt(v)};
}

IntervalScore ScoreIntervals(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor) {
  IntervalScore r;
  const double n = static_cast<double>(std::max<size_t>(1, errors.size()));
  for (size_t i = 0; i < errors.size(); ++i) {
    const double s = std::max(sigmas[i], floor), z = std::abs(errors[i]) / s;
    r.coverage_1sigma += z <= 1 ? 1 : 0;
    r.coverage_2sigma += z <= 2 ? 1 : 0;
    r.gaussian_nll += 0.5 * std::log(2 * M_PI) + std::log(s) + 0.5 * z * z;
    for (int j = 0; j < kReliabilityLevels; ++j) r.observed[j] += z <= kReliabilityZ[j] ? 1 : 0;
  }
  r.coverage_1sigma /= n, r.coverage_2sigma /= n, r.gaussian_nll /= n;
  for (int j = 0; j < kReliabilityLevels; ++j) {
    r.observed[j] /= n;
    r.ice += std::abs(r.observed[j] - kReliabilityNominal[j]) / kReliabilityLevels;
  }
  return r;
}

IntervalScore CrossFittedScore(const std::vector<double>& errors, const std::vector<double>& sigmas, double floor) {
  std::vector<double> mapped(sigmas.size());
  if (errors.size() < 4) {
    const SigmaMap m = FitSigmaMap(errors, sigmas, floor);
    for (size_t i = 0; i < sigmas.size(); ++i) mapped[i] = m.Apply(std::max(sigmas[i], floor));
    return ScoreIntervals(errors, mapped, floor);
  }
  for (bool odd : {false, true}) {
    const SigmaMap m = FitSigmaMap(Half(errors, !odd), Half(sigmas, !odd), floor);
    for (size_t i = odd ? 1 : 0; i < sigmas.size(); i += 2) mapped[i] = m.Apply(std::max(sigmas[i], floor));
  }
  return ScoreIntervals(errors, mapped, floor);
}

std::vector<double> Temper(const std::vector<double>& probs, size_t classes, double t) {
  std::vector<double> out(probs.size());
  for (size_t i = 0; i * classes < probs.size(); ++i) {
    double top = -INFINITY;
    for (size_t c = 0; c < classes; ++c) top = std::max(top, std::log(std::max(probs[i * classes + c], 1e-300)) / t);
    double sum = 0;
    for (size_t c = 0; c < classes; ++c) {
      out[i * classes + c] = std::exp(std::log(std::max(probs[i * classes + c], 1e-300)) / t - top);
      sum += out[i * classes + c];
    }
    for (size_t c = 0; c < classes; ++c) out[i * classes + c] /= sum;
  }
  return out;
}

double FitTemperature(const std::vector<double>& probs, const std::vector<float>& labels, size_t classes) {
  if (labels.empty()) return 1.0;
  return std::exp(GoldenMin([&](double lt) { return Nll(Temper(probs, classes, std::exp(lt)), labels, classes); },
                            std::log(0.05), std::log(20.0), 50));
}

std::vector<double> CrossFittedTemper(const std::vector<double>& probs, const std::vector<float>& labels,
                                      size_t classes) {
  if (labels.size() < 4) return Temper(probs, classes, FitTemperature(probs, labels, classes));
  std::vector<double> out(probs.size());
  for (bool odd : {false, true}) {
    const double t = FitTemperature(Half(probs, !odd, classes), Half(labels, !odd), classes);
    const std::vector<double> tempered = Temper(probs, classes, t);
    for (size_t i = odd ? 1 : 0; i < labels.size(); i += 2)
      std::copy(tempered.begin() + i * classes, tempered.begin() + (i + 1) * classes, out.begin() + i * classes);
  }
  return out;
}

}  // namespace ens
