// Tests of worker/mlp_kernel: the fused MLP's outputs and gradients against a double-precision
// reference (finite differences of a plain forward), for every activation, with dropout masks
// and batches that are not a multiple of the kernel's 8 partial sums; and member k's bits the
// same alone and in a pack, whatever the member range a call covers.
#include "worker/kernels/mlp_kernel.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

namespace ens {
namespace {

// A pack's arrays, filled from a fixed seed.
struct Pack {
  MlpShape shape;
  std::vector<std::vector<float>> w, b, masks;  // masks: empty = none for that layer
  std::vector<float> x;

  MlpParams Params() const {
    MlpParams p;
    for (size_t l = 0; l < w.size(); ++l) p.weights.push_back(w[l].data()), p.biases.push_back(b[l].data());
    for (const auto& m : masks) p.masks.push_back(m.empty() ? nullptr : m.data());
    return p;
  }
  // Member k alone: a pack of one with its slices.
  Pack Member(int64_t k) const {
    Pack one = *this;
    one.shape.members = 1;
    auto slice = [&](const std::vector<float>& v) {
      const size_t per = v.size() / static_cast<size_t>(shape.members);
      return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(k * per),
                                v.begin() + static_cast<std::ptrdiff_t>((k + 1) * per));
    };
    for (size_t l = 0; l < w.size(); ++l) one.w[l] = slice(w[l]), one.b[l] = slice(b[l]);
    for (auto& m : one.masks)
      if (!m.empty()) m = slice(m);
    one.x = slice(x);
    return one;
  }
};

Pack MakePack(int64_t members, int64_t batch, int64_t inputs, std::vector<int64_t> units, Activation act,
              bool dropout, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.7f);
  Pack p;
  p.shape.members = members, p.shape.batch = batch, p.shape.inputs = inputs, p.shape.units = units;
  p.shape.activations.assign(units.size() - 1, act);
  int64_t in = inputs;
  for (int64_t u : units) {
    std::vector<float> w(static_cast<size_t>(members * u * in)), b(static_cast<size_t>(members * u));
    for (auto& v : w) v = normal(gen);
    for (auto& v : b) v = normal(gen);
    p.w.push_back(w), p.b.push_back(b);
    in = u;
  }
  for (size_t l = 0; l + 1 < units.size(); ++l) {
    std::vector<float> m;
    if (dropout && l == 0) {  // member 0 keeps everything (rate 0), the others drop some at 1/keep = 2
      m.resize(static_cast<size_t>(members * batch * units[l]));
      for (size_t e = 0; e < m.size(); ++e)
        m[e] = e < static_cast<size_t>(batch * units[l]) ? 1.0f : (gen() % 2 == 0 ? 0.0f : 2.0f);
    }
    p.masks.push_back(m);
  }
  p.x.resize(static_cast<size_t>(members * batch * inputs));
  for (auto& v : p.x) v = normal(gen);
  return p;
}

double Act(Activation a, double z) {
  switch (a) {
    case Activation::kRelu: return z > 0 ? z : 0;
    case Activation::kTanh: return std::tanh(z);
    case Activation::kSigmoid: return 1 / (1 + std::exp(-z));
    case Activation::kSwish: return z / (1 + std::exp(-z));
    case Activation::kGelu: return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    case Activation::kLinear: return z;
  }
  return z;
}

// sum(out * g) of member k in double, with weight (layer, index) of member k moved by `delta`
// (layer -1: no move), and x's element `xi` of member k moved when layer == -2.
double RefObjective(const Pack& p, int64_t k, const std::vector<float>& g, int layer, bool bias, int64_t index,
                    double delta) {
  const MlpShape& s = p.shape;
  const int64_t B = s.batch;
  std::vector<double> h(static_cast<size_t>(B * s.inputs));
  for (int64_t e = 0; e < B * s.inputs; ++e)
    h[e] = p.x[k * B * s.inputs + e] + (layer == -2 && e == index ? delta : 0.0);
  double total = 0;
  for (int64_t l = 0; l < s.Layers(); ++l) {
    const int64_t I = s.LayerInputs(l), U = s.units[l];
    std::vector<double> next(static_cast<size_t>(B * U));
    for (int64_t r = 0; r < B; ++r)
      for (int64_t o = 0; o < U; ++o) {
        double z = p.b[l][k * U + o] + (layer == l && bias && index == o ? delta : 0.0);
        for (int64_t i = 0; i < I; ++i)
          z += h[r * I + i] * (p.w[l][k * U * I + o * I + i] + (layer == l && !bias && index == o * I + i ? delta : 0.0));
        if (l + 1 == s.Layers()) {
          total += z * g[k * B * U + r * U + o];
          continue;
        }
        double a = Act(s.activations[l], z);
        if (!p.masks[l].empty()) a *= p.masks[l][k * B * U + r * U + o];
        next[r * U + o] = a;
      }
    h.swap(next);
  }
  return total;
}

struct Grads {
  std::vector<float> out, x;
  std::vector<std::vector<float>> w, b;
};

Grads Run(const Pack& p, const std::vector<float>& g, int64_t first = 0, int64_t last = -1) {
  const MlpShape& s = p.shape;
  if (last < 0) last = s.members;
  Grads r;
  r.out.assign(static_cast<size_t>(s.members * s.batch * s.units.back()), 0.0f);
  std::vector<float> tape(static_cast<size_t>(s.members * s.TapeFloats()));
  const MlpParams params = p.Params();
  MlpForward(s, params, p.x.data(), r.out.data(), tape.data(), first, last);
  std::vector<float*> gw, gb;
  for (size_t l = 0; l < p.w.size(); ++l) {
    r.w.emplace_back(p.w[l].size(), 0.0f), r.b.emplace_back(p.b[l].size(), 0.0f);
  }
  for (size_t l = 0; l < p.w.size(); ++l) gw.push_back(r.w[l].data()), gb.push_back(r.b[l].data());
  r.x.assign(p.x.size(), 0.0f);
  MlpBackward(s, params, tape.data(), g.data(), gw, gb, r.x.data(), first, last);
  return r;
}

std::vector<float> RandomGrad(const MlpShape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(static_cast<size_t>(s.members * s.batch * s.units.back()));
  for (auto& v : g) v = normal(gen);
  return g;
}

bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST_CASE("the fused MLP's outputs and gradients match a double-precision reference for every activation",
          "[mlp_kernel]") {
  const Activation acts[] = {Activation::kRelu,  Activation::kTanh, Activation::kSigmoid,
                             Activation::kSwish, Activation::kGelu, Activation::kLinear};
  for (Activation act : acts) {
    for (bool dropout : {false, true}) {
      CAPTURE(static_cast<int>(act), dropout);
      const Pack p = MakePack(3, 11, 5, {7, 4, 2}, act, dropout, 17);
      const std::vector<float> g = RandomGrad(p.shape, 5);
      const Grads r = Run(p, g);
      const double eps = 1e-5;
      for (int64_t k = 0; k < p.shape.members; ++k) {
        // Outputs: the objective with g one-hot is one output.
        double dot = 0;
        const size_t per_out = r.out.size() / 3;
        for (size_t e = 0; e < per_out; ++e) dot += static_cast<double>(r.out[k * per_out + e]) * g[k * per_out + e];
        CHECK(dot == Approx(RefObjective(p, k, g, -1, false, 0, 0)).epsilon(1e-4).margin(1e-4));
        auto numeric = [&](int layer, bool bias, int64_t index) {
          return (RefObjective(p, k, g, layer, bias, index, eps) - RefObjective(p, k, g, layer, bias, index, -eps)) /
                 (2 * eps);
        };
        for (int l = 0; l < 3; ++l) {
          const int64_t U = p.shape.units[l], I = p.shape.LayerInputs(l);
          for (int64_t e = 0; e < U * I; ++e)
            CHECK(r.w[l][k * U * I + e] == Approx(numeric(l, false, e)).epsilon(1e-3).margin(1e-4));
          for (int64_t o = 0; o < U; ++o) CHECK(r.b[l][k * U + o] == Approx(numeric(l, true, o)).epsilon(1e-3).margin(1e-4));
        }
        const int64_t nx = p.shape.batch * p.shape.inputs;
        for (int64_t e = 0; e < nx; ++e) CHECK(r.x[k * nx + e] == Approx(numeric(-2, false, e)).epsilon(1e-3).margin(1e-4));
      }
    }
  }
}

TEST_CASE("a member of the fused MLP has the same bits alone, in a pack, and in any member range", "[mlp_kernel]") {
  const Pack p = MakePack(5, 37, 9, {16, 6, 1}, Activation::kSigmoid, /*dropout=*/true, 3);
  const std::vector<float> g = RandomGrad(p.shape, 9);
  const Grads all = Run(p, g);
  // The same pack in two calls over member ranges [0, 2) and [2, 5), as two threads would.
  Grads split = Run(p, g, 0, 2);
  const Grads rest = Run(p, g, 2, 5);
  for (int64_t k = 0; k < p.shape.members; ++k) {
    CAPTURE(k);
    const Pack one = p.Member(k);
    const size_t per_g = g.size() / 5;
    const std::vector<float> gk(g.begin() + static_cast<std::ptrdiff_t>(k * per_g),
                                g.begin() + static_cast<std::ptrdiff_t>((k + 1) * per_g));
    const Grads alone = Run(one, gk);
    const Grads& ranged = k < 2 ? split : rest;
    CHECK(SameBits(alone.out.data(), all.out.data() + k * alone.out.size(), alone.out.size()));
    CHECK(SameBits(alone.out.data(), ranged.out.data() + k * alone.out.size(), alone.out.size()));
    CHECK(SameBits(alone.x.data(), all.x.data() + k * alone.x.size(), alone.x.size()));
    for (size_t l = 0; l < p.w.size(); ++l) {
      CHECK(SameBits(alone.w[l].data(), all.w[l].data() + k * alone.w[l].size(), alone.w[l].size()));
      CHECK(SameBits(alone.b[l].data(), all.b[l].data() + k * alone.b[l].size(), alone.b[l].size()));
      CHECK(SameBits(alone.w[l].data(), ranged.w[l].data() + k * alone.w[l].size(), alone.w[l].size()));
    }
  }
}

TEST_CASE("the fused MLP's forward gives the same bits with and without a tape, and without x's gradient",
          "[mlp_kernel]") {
  const Pack p = MakePack(4, 32, 9, {6, 1}, Activation::kRelu, false, 11);
  const std::vector<float> g = RandomGrad(p.shape, 2);
  const Grads with = Run(p, g);
  std::vector<float> out(with.out.size());
  MlpForward(p.shape, p.Params(), p.x.data(), out.data(), nullptr, 0, p.shape.members);
  CHECK(SameBits(out.data(), with.out.data(), out.size()));
  // Backward without grad_x: the same parameter gradients.
  std::vector<float> tape(static_cast<size_t>(p.shape.members * p.shape.TapeFloats()));
  MlpForward(p.shape, p.Params(), p.x.data(), out.data(), tape.data(), 0, p.shape.members);
  std::vector<std::vector<float>> w{std::vector<float>(p.w[0].size()), std::vector<float>(p.w[1].size())};
  std::vector<std::vector<float>> b{std::vector<float>(p.b[0].size()), std::vector<float>(p.b[1].size())};
  MlpBackward(p.shape, p.Params(), tape.data(), g.data(), {w[0].data(), w[1].data()}, {b[0].data(), b[1].data()},
              nullptr, 0, p.shape.members);
  for (size_t l = 0; l < 2; ++l) {
    CHECK(SameBits(w[l].data(), with.w[l].data(), w[l].size()));
    CHECK(SameBits(b[l].data(), with.b[l].data(), b[l].size()));
  }
}

}  // namespace
}  // namespace ens
