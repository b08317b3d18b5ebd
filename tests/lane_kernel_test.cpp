// Tests of worker/lane_kernel: every form the block code is compiled to that this CPU runs
// (the vector ISAs and the CUDA kernel's per-thread form compiled for the host, LaneIsa::kThread)
// gives the same bits on every shape, activation, loss and optimizer the kernel has, with and
// without dropout masks, with adversarial training, training and validating; a member's bits do not depend on its lane or
// its block mates; one CUDA launch's threads run on the host (per-thread scratch, a skipped
// block) give each block the vector lanes' bits; a member's predictions (LaneForwardRows) are
// its lane's forward in every form; and the kernel trains (the loss falls), so equal bits are not equal nothing.
// Pure C++: no libtorch.
#include "worker/kernels/lane_kernel.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace ens {
namespace {

constexpr int64_t kRows = 97;  // the table's rows
constexpr int64_t kLen = 70;   // a window's positions: two whole batches of 32 and one of 6
constexpr int64_t kBatch = 32;

struct Case {
  std::vector<int64_t> hidden;
  Activation act;
  LossKind loss;
  OptimizerKind opt;
  bool masks;
  bool adversarial = false;
};

std::string Describe(const Case& c) {
  std::string s = "hidden";
  for (int64_t u : c.hidden) s += " " + std::to_string(u);
  return s + " " + std::string(Name(c.act)) + " " + std::string(Name(c.loss)) + " " + std::string(Name(c.opt)) +
         (c.masks ? " masks" : "") + (c.adversarial ? " adversarial" : "");
}

// One block of 16 lanes with its own data, each lane a different member (its own parameters,
// hyperparameters, rows and masks), built from a seed.
struct Block {
  LaneNet net;
  std::vector<float> params, m, v, hyper, table, corrections, masks;
  std::vector<double> sums;
  std::vector<int64_t> offsets;
  int64_t steps = 0, hidden = 0;

  Block(const Case& c, uint32_t seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 0.6f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    net.inputs = 5;
    net.layers = static_cast<int64_t>(c.hidden.size()) + 1;
    for (size_t l = 0; l < c.hidden.size(); ++l) net.units[l] = c.hidden[l], net.activations[l] = c.act, hidden += c.hidden[l];
    net.units[c.hidden.size()] = c.loss == LossKind::kGaussianNll ? 2 : 1;
    net.loss = c.loss;
    net.optimizer = c.opt;
    net.adversarial = c.adversarial;
    const int64_t P = net.Params(), F = net.inputs, W = kLaneWidth;
    params.resize(static_cast<size_t>(P * W));
    for (auto& p : params) p = normal(gen);
    m.assign(params.size(), 0.0f);
    v.assign(params.size(), 0.0f);
    hyper.resize(static_cast<size_t>((kLaneHyperRows + 3 * F) * W));
    for (int j = 0; j < W; ++j) {
      auto at = [&](int64_t row) -> float& { return hyper[static_cast<size_t>(row * W + j)]; };
      at(kLaneLr) = 1e-3f * static_cast<float>(1 + j % 4);
      at(kLaneDecay) = c.opt == OptimizerKind::kAdamW ? 1.0f - at(kLaneLr) * 0.01f : 1.0f;
      at(kLaneWeightDecay) = j % 2 == 0 ? 0.0f : 1e-4f;
      at(kLaneMomentum) = 0.9f;
      at(kLaneL1) = j % 3 == 1 ? 1e-4f : 0.0f;
      at(kLaneL2x2) = j % 3 == 2 ? 2e-4f : 0.0f;
      at(kLanePenalty) = at(kLaneL1) != 0.0f || at(kLaneL2x2) != 0.0f ? 1.0f : 0.0f;
      at(kLaneDelta) = 0.3f + 0.1f * static_cast<float>(j % 5);
      at(kLanePoison) = 1.0f;
      at(kLaneYMean) = 0.5f;
      at(kLaneYStd) = 1.5f;
      for (int64_t f = 0; f < F; ++f) {
        at(kLaneHyperRows + f) = 0.1f * static_cast<float>(f);
        at(kLaneHyperRows + F + f) = 1.0f + 0.05f * static_cast<float>(f);
        at(kLaneHyperRows + 2 * F + f) = c.adversarial ? 0.01f * static_cast<float>(1 + (f + j) % 3) : 0.0f;
      }
    }
    table.resize(static_cast<size_t>(kRows * (F + 1)));
    for (auto& t : table) t = normal(gen) * 2.0f;
    offsets.resize(static_cast<size_t>(kLen * W));
    for (auto& o : offsets) o = static_cast<int64_t>(gen() % kRows) * (F + 1);
    steps = (kLen + kBatch - 1) / kBatch;
    corrections.resize(static_cast<size_t>(steps * 2 * W));
    for (int64_t s = 0; s < steps; ++s)
      for (int j = 0; j < W; ++j) {
        const double t = static_cast<double>(s + 1 + j);
        corrections[static_cast<size_t>((s * 2) * W + j)] = static_cast<float>(1.0 - std::pow(0.9, t));
        corrections[static_cast<size_t>((s * 2 + 1) * W + j)] = static_cast<float>(std::sqrt(1.0 - std::pow(0.999, t)));
      }
    if (c.masks) {
      masks.resize(static_cast<size_t>(kLen * hidden * (c.adversarial ? 2 : 1) * W));
      for (auto& k : masks) k = unit(gen) < 0.2f ? 0.0f : 1.25f;
    }
    sums.assign(static_cast<size_t>(3 * W), 0.0);
  }

  // Copies lane `from` of every per-lane array into lane `to`.
  void CopyLane(int from, int to) {
    for (std::vector<float>* a : {&params, &m, &v, &hyper, &corrections, &masks})
      for (size_t i = 0; i < a->size(); i += kLaneWidth) (*a)[i + static_cast<size_t>(to)] = (*a)[i + static_cast<size_t>(from)];
    for (size_t i = 0; i < offsets.size(); i += kLaneWidth) offsets[i + static_cast<size_t>(to)] = offsets[i + static_cast<size_t>(from)];
  }

  void Run(LaneIsa isa, bool train) {
    std::vector<float> scratch_store(static_cast<size_t>(net.ScratchFloats() + 16));
    float* scratch = scratch_store.data();
    while (reinterpret_cast<uintptr_t>(scratch) % 64 != 0) ++scratch;
    LaneBlock b{params.data(), m.data(), net.optimizer == OptimizerKind::kSgd ? nullptr : v.data(), hyper.data(),
                sums.data()};
    LaneWindow w;
    w.table = table.data();
    w.offsets = offsets.data();
    w.len = kLen;
    w.batch = kBatch;
    w.corrections = train ? corrections.data() : nullptr;
    w.masks = train && !masks.empty() ? masks.data() : nullptr;
    w.train = train;
    LaneTrainWindow(isa, net, b, w, scratch);
  }
};

// The same bits, except that any NaN equals any NaN: a lane that reached NaN is a member that
// failed (non-finite), and which NaN (payload, sign) an operation returns is the hardware's and
// the compiler's operand order's, not promised.
template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}
template <typename T>
bool AllFinite(const std::vector<T>& a) {
  for (T x : a)
    if (!std::isfinite(x)) return false;
  return true;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const std::vector<std::vector<int64_t>> shapes = {{6}, {7, 3}, {4, 5, 3}};
  for (const auto& h : shapes)
    for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid, Activation::kSwish,
                         Activation::kGelu, Activation::kLinear})
      for (LossKind l : {LossKind::kHuber, LossKind::kMse, LossKind::kMae, LossKind::kGaussianNll})
        for (OptimizerKind o : {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
          for (bool masks : {false, true}) {
            cases.push_back({h, a, l, o, masks});
            cases.push_back({h, a, l, o, masks, true});  // adversarial training
          }
        }
  return cases;
}

TEST_CASE("every form of the block code, the CUDA thread form included, gives the same bits", "[lane_kernel][bits]") {
  const std::vector<LaneIsa> forms = AvailableLaneIsas();
  REQUIRE(forms.front() == LaneIsa::kBaseline);
  REQUIRE(forms.back() == LaneIsa::kThread);
  int cases = 0, finite = 0;
  for (const Case& c : AllCases()) {
    CAPTURE(Describe(c));
    Block reference(c, 17u + static_cast<uint32_t>(cases++));
    const std::vector<float> start = reference.params;
    reference.Run(LaneIsa::kBaseline, true);
    reference.Run(LaneIsa::kBaseline, true);  // a second window from where the first left off
    reference.Run(LaneIsa::kBaseline, false);
    REQUIRE(!SameBits(start, reference.params));  // it trained
    finite += AllFinite(reference.params) && AllFinite(reference.sums) ? 1 : 0;
    for (LaneIsa isa : forms) {
      CAPTURE(Name(isa));
      Block b(c, 17u + static_cast<uint32_t>(cases - 1));
      b.Run(isa, true);
      b.Run(isa, true);
      b.Run(isa, false);
      CHECK(SameBits(b.params, reference.params));
      CHECK(SameBits(b.m, reference.m));
      CHECK(SameBits(b.v, reference.v));
      CHECK(SameBits(b.sums, reference.sums));
    }
  }
  CHECK(cases == 3 * 6 * 4 * 3 * 4);
  CHECK(finite > cases * 9 / 10);  // a few cases' lanes diverge (SGD on random members); most train
}

TEST_CASE("a member's bits do not depend on its lane or its block mates, in every form", "[lane_kernel][bits]") {
  for (LaneIsa isa : AvailableLaneIsas()) {
    CAPTURE(Name(isa));
    const Case c{{7, 3}, Activation::kSwish, LossKind::kHuber, OptimizerKind::kAdam, true};
    Block mixed(c, 5u);
    Block alone(c, 5u);
    for (int j = 0; j < kLaneWidth; ++j) alone.CopyLane(11, j);  // member 11 in every lane
    mixed.Run(isa, true);
    alone.Run(isa, true);
    for (int j : {0, 7, 11, 15}) {
      CAPTURE(j);
      for (int64_t p = 0; p < mixed.net.Params(); ++p) {
        const size_t mine = static_cast<size_t>(p * kLaneWidth + 11), there = static_cast<size_t>(p * kLaneWidth + j);
        REQUIRE(std::memcmp(&mixed.params[mine], &alone.params[there], sizeof(float)) == 0);
      }
      REQUIRE(std::memcmp(&mixed.sums[11], &alone.sums[static_cast<size_t>(j)], sizeof(double)) == 0);
    }
  }
}

// Three blocks' arrays back to back, as LaneStep lays a pack out for a launch.
template <typename T>
std::vector<T> Concat(const std::vector<std::vector<T>*>& parts) {
  std::vector<T> all;
  for (auto* p : parts) all.insert(all.end(), p->begin(), p->end());
  return all;
}

TEST_CASE("one launch's threads on the host give each block the vector lanes' bits", "[lane_kernel][bits][launch]") {
  for (const Case& c : {Case{{6}, Activation::kSigmoid, LossKind::kHuber, OptimizerKind::kAdam, true},
                        Case{{7, 3}, Activation::kRelu, LossKind::kMae, OptimizerKind::kSgd, false}}) {
    CAPTURE(Describe(c));
    std::vector<Block> blocks = {Block(c, 40u), Block(c, 41u), Block(c, 42u)};
    for (Block& b : blocks) b.table = blocks[0].table;  // one row table for the pack
    std::vector<Block> reference = blocks;
    for (int i : {0, 2}) reference[static_cast<size_t>(i)].Run(LaneIsa::kBaseline, true);  // block 1 does not run
    auto field = [&](auto member) {
      using T = typename std::remove_reference_t<decltype(blocks[0].*member)>::value_type;
      std::vector<std::vector<T>*> parts;
      for (Block& b : blocks) parts.push_back(&(b.*member));
      return Concat(parts);
    };
    std::vector<float> params = field(&Block::params), m = field(&Block::m), v = field(&Block::v);
    std::vector<float> hyper = field(&Block::hyper), corrections = field(&Block::corrections), masks = field(&Block::masks);
    std::vector<double> sums = field(&Block::sums);
    std::vector<int64_t> offsets = field(&Block::offsets);
    const uint8_t running[3] = {1, 0, 1};
    const int64_t per_thread = blocks[0].net.ScratchFloats() / kLaneWidth;
    std::vector<float> scratch(static_cast<size_t>(3 * kLaneWidth * per_thread), 0.0f);
    LanePackWindow pw;
    pw.first = LaneBlock{params.data(), m.data(), c.opt == OptimizerKind::kSgd ? nullptr : v.data(), hyper.data(),
                         sums.data()};
    pw.window.table = blocks[0].table.data();
    pw.window.offsets = offsets.data();
    pw.window.len = kLen;
    pw.window.batch = kBatch;
    pw.window.corrections = corrections.data();
    pw.window.masks = c.masks ? masks.data() : nullptr;
    pw.blocks = 3;
    pw.param_stride = static_cast<int64_t>(blocks[0].params.size());
    pw.hyper_stride = static_cast<int64_t>(blocks[0].hyper.size());
    pw.sums_stride = static_cast<int64_t>(blocks[0].sums.size());
    pw.offsets_stride = static_cast<int64_t>(blocks[0].offsets.size());
    pw.corrections_stride = static_cast<int64_t>(blocks[0].corrections.size());
    pw.masks_stride = static_cast<int64_t>(blocks[0].masks.size());
    pw.running = running;
    pw.scratch = scratch.data();
    pw.scratch_per_thread = per_thread;
    LaneLaunchOnHost(blocks[0].net, pw);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      const size_t P = blocks[0].params.size();
      CHECK(std::memcmp(params.data() + i * P, reference[i].params.data(), P * sizeof(float)) == 0);
      CHECK(std::memcmp(m.data() + i * P, reference[i].m.data(), P * sizeof(float)) == 0);
      CHECK(std::memcmp(sums.data() + i * 3 * kLaneWidth, reference[i].sums.data(), 3 * kLaneWidth * sizeof(double)) == 0);
    }
    CHECK(std::memcmp(params.data() + blocks[0].params.size(), blocks[1].params.data(),
                      blocks[1].params.size() * sizeof(float)) == 0);  // the skipped block is untouched
  }
}

TEST_CASE("a member's predictions (LaneForwardRows) are its lane's forward, in every form and any rows", "[lane_kernel][bits]") {
  // For each member (lane) and row: a validation window of that one row gives the lane's
  // |prediction - target| in target units (its mae sum, one float widened); the member's own
  // parameters through LaneForwardRows, on the standardised row, give the same prediction. The
  // rows are scaled so that e^x's clamps are reached, and a few are zero.
  const std::vector<LaneIsa> forms = AvailableLaneIsas();
  int cases = 0;
  for (const std::vector<int64_t>& hidden : {std::vector<int64_t>{6}, std::vector<int64_t>{7, 3}, std::vector<int64_t>{4, 5, 3}})
    for (Activation act : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid, Activation::kSwish,
                           Activation::kGelu, Activation::kLinear})
      for (LossKind loss : {LossKind::kMse, LossKind::kGaussianNll}) {
        const Case c{hidden, act, loss, OptimizerKind::kAdam, false};
        CAPTURE(Describe(c));
        Block b(c, 300u + static_cast<uint32_t>(cases++));
        const int64_t F = b.net.inputs, P = b.net.Params(), O = b.net.units[b.net.layers - 1];
        for (size_t i = 0; i < b.table.size(); ++i) b.table[i] *= i % 7 == 0 ? 40.0f : (i % 11 == 0 ? 0.0f : 1.0f);
        std::vector<float> scratch(static_cast<size_t>(b.net.ScratchFloats() + 16));
        float* aligned = scratch.data();
        while (reinterpret_cast<uintptr_t>(aligned) % 64 != 0) ++aligned;
        for (int j = 0; j < kLaneWidth; ++j) {
          CAPTURE(j);
          std::vector<float> own(static_cast<size_t>(P));
          for (int64_t p = 0; p < P; ++p) own[static_cast<size_t>(p)] = b.params[static_cast<size_t>(p * kLaneWidth + j)];
          auto hyper = [&](int64_t row) { return b.hyper[static_cast<size_t>(row * kLaneWidth + j)]; };
          std::vector<float> x(static_cast<size_t>(kRows * F));
          for (int64_t r = 0; r < kRows; ++r)
            for (int64_t f = 0; f < F; ++f)
              x[static_cast<size_t>(r * F + f)] =
                  (b.table[static_cast<size_t>(r * (F + 1) + f)] - hyper(kLaneHyperRows + f)) / hyper(kLaneHyperRows + F + f);
          std::vector<float> all(static_cast<size_t>(kRows * O));
          LaneForwardRows(LaneIsa::kBaseline, b.net, own.data(), x.data(), F, kRows, all.data(), aligned);
          for (LaneIsa isa : forms) {  // every form; rows one at a time and in odd runs
            CAPTURE(Name(isa));
            std::vector<float> again(all.size(), -1.0f);
            for (int64_t r = 0; r < kRows; r += 1 + r % 5) {
              const int64_t n = std::min<int64_t>(1 + r % 5, kRows - r);
              LaneForwardRows(isa, b.net, own.data(), x.data() + r * F, F, n, again.data() + r * O, aligned);
            }
            CHECK(SameBits(again, all));
          }
          for (int64_t r = 0; r < kRows; ++r) {
            for (auto& o : b.offsets) o = r * (F + 1);
            std::fill(b.sums.begin(), b.sums.end(), 0.0);
            LaneBlock blk{b.params.data(), b.m.data(), b.v.data(), b.hyper.data(), b.sums.data()};
            LaneWindow w;
            w.table = b.table.data();
            w.offsets = b.offsets.data();
            w.len = 1;
            w.batch = 1;
            w.train = false;
            LaneTrainWindow(LaneIsa::kBaseline, b.net, blk, w, aligned);
            const float scaled = all[static_cast<size_t>(r * O)] * hyper(kLaneYStd);
            const float prediction = scaled + hyper(kLaneYMean);
            const float error = prediction - b.table[static_cast<size_t>(r * (F + 1) + F)];
            const double lane = b.sums[static_cast<size_t>(kLaneWidth + j)];
            if (!std::isnan(lane)) REQUIRE(lane == static_cast<double>(std::fabs(error)));
          }
        }
      }
  CHECK(cases == 3 * 6 * 2);
}

TEST_CASE("the lane kernel lowers each member's training loss over windows", "[lane_kernel]") {
  const Case c{{6}, Activation::kSigmoid, LossKind::kMse, OptimizerKind::kAdam, false};
  Block b(c, 3u);
  for (int j = 0; j < kLaneWidth; ++j) b.hyper[static_cast<size_t>(kLaneLr * kLaneWidth + j)] = 0.02f;
  b.Run(LaneIsa::kThread, false);
  const std::vector<double> first(b.sums.begin(), b.sums.begin() + kLaneWidth);
  for (int i = 0; i < 40; ++i) b.Run(LaneIsa::kThread, true);
  std::fill(b.sums.begin(), b.sums.end(), 0.0);
  b.Run(LaneIsa::kThread, false);
  for (int j = 0; j < kLaneWidth; ++j) {
    CAPTURE(j);
    CHECK(b.sums[static_cast<size_t>(j)] < first[static_cast<size_t>(j)]);
  }
}

}  // namespace
}  // namespace ens
