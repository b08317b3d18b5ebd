// Friedman #1 generator (data_source.h). The draw order per row is fixed — every feature
// uniform, then one normal for the noise, drawn even when noise == 0 — so the features of
// a seed do not depend on the noise level and the bits are part of the reproducibility
// contract.
#include <cmath>
#include <string>

#include "common/data/data_source.h"
#include "common/base/seed.h"

namespace ens {

namespace {

constexpr double kPi = 3.14159265358979323846;

double Friedman1(const float* row) {
  const double x0 = row[0], x1 = row[1], x2 = row[2], x3 = row[3], x4 = row[4];
  return 10.0 * std::sin(kPi * x0 * x1) + 20.0 * (x2 - 0.5) * (x2 - 0.5) + 10.0 * x3 + 5.0 * x4;
}

}  // namespace

float Friedman1Target(const float* row) { return static_cast<float>(Friedman1(row)); }

Table GenerateFriedman1(int rows, int features, double noise, uint64_t seed) {
  Table t;
  t.features = features;
  for (int c = 0; c < features; ++c) t.feature_names.push_back("x" + std::to_string(c));
  if (rows <= 0 || features < 5) return t;  // REQUIRES violated: an empty, well-formed table
  t.x.reserve(static_cast<size_t>(rows) * features);
  t.y.reserve(rows);
  SeededRng rng(seed);
  std::vector<float> row(features);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < features; ++c) row[c] = static_cast<float>(rng.Uniform());
    const double eps = rng.Normal();
    t.AppendRow(row.data(), static_cast<float>(Friedman1(row.data()) + noise * eps));
  }
  return t;
}

}  // namespace ens
