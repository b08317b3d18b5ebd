// Tests of worker/kernels/loss_formulas.h, the one formula of each regression loss that every
// engine runs: each value against its closed form (both of huber's branches and its joint) and
// each slope against the value's own derivative, taken numerically. The bit tests cannot see a
// formula that is wrong the same way in every engine; these can.
#include "worker/kernels/loss_formulas.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ens {
namespace {

// The ops policy in double, for the closed forms (the engines' float ops are tested against
// each other by the lane kernel and trainer tests).
struct DoubleOps {
  static double Abs(double x) { return std::fabs(x); }
  static double Sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }
  static double Clamp(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
  static double Where(bool mask, double a, double b) { return mask ? a : b; }
  static double Log(double x) { return std::log(x); }
  static double Softplus(double r) { return std::log1p(std::exp(-std::fabs(r))) + std::max(r, 0.0); }
  static double SoftplusDerivative(double r) { return 1.0 / (1.0 + std::exp(-r)); }
  [[noreturn]] static void NotRegression(LossKind) { throw std::invalid_argument("not a regression loss"); }
};

double Value(LossKind kind, double e, double delta = 1.0, double r = 0.0) {
  return LossValue<DoubleOps>(kind, e, delta, r);
}

TEST_CASE("each loss's value is its closed form", "[loss_formulas]") {
  for (double e : {-3.0, -0.4, 0.0, 0.25, 2.5}) {
    INFO("e = " << e);
    CHECK(Value(LossKind::kMse, e) == Approx(e * e));
    CHECK(Value(LossKind::kMae, e) == Approx(std::fabs(e)));
  }
  // huber, delta 1.5: 0.5 e^2 within delta, delta (|e| - delta / 2) beyond, equal at the joint
  const double d = 1.5;
  CHECK(Value(LossKind::kHuber, 0.5, d) == Approx(0.125));
  CHECK(Value(LossKind::kHuber, -1.0, d) == Approx(0.5));
  CHECK(Value(LossKind::kHuber, 3.0, d) == Approx(1.5 * (3.0 - 0.75)));
  CHECK(Value(LossKind::kHuber, -4.0, d) == Approx(1.5 * (4.0 - 0.75)));
  CHECK(Value(LossKind::kHuber, d, d) == Approx(0.5 * d * d));
  CHECK(Value(LossKind::kHuber, d + 1e-9, d) == Approx(0.5 * d * d));
  // gaussian_nll: 0.5 (ln var + e^2 / var), var = softplus(r) + 1e-6
  for (double r : {-2.0, 0.0, 1.3}) {
    const double var = std::log1p(std::exp(r)) + 1e-6;
    INFO("r = " << r);
    CHECK(Value(LossKind::kGaussianNll, 0.7, 1.0, r) == Approx(0.5 * (std::log(var) + 0.49 / var)));
  }
  CHECK_THROWS_AS(Value(LossKind::kCrossEntropy, 0.5), std::invalid_argument);
}

TEST_CASE("each loss's slopes are the derivatives of its value", "[loss_formulas]") {
  const double h = 1e-6;
  for (LossKind kind : {LossKind::kMse, LossKind::kMae, LossKind::kHuber, LossKind::kGaussianNll}) {
    for (double e : {-2.7, -0.6, 0.3, 1.1, 3.4}) {
      for (double r : {-1.0, 0.4}) {
        INFO(Name(kind) << " at e = " << e << ", r = " << r);
        double s[2] = {0, 0};
        LossSlopes<DoubleOps>(kind, e, 1.2, r, s);
        CHECK(s[0] == Approx((Value(kind, e + h, 1.2, r) - Value(kind, e - h, 1.2, r)) / (2 * h)).epsilon(1e-5));
        if (kind == LossKind::kGaussianNll)
          CHECK(s[1] == Approx((Value(kind, e, 1.2, r + h) - Value(kind, e, 1.2, r - h)) / (2 * h)).epsilon(1e-5));
      }
    }
  }
}

}  // namespace
}  // namespace ens
