// PackStep (worker/train/pack_step.h), the CUDA path's training step, run on CPU tensors
// (TrainPath::kTensorOps): it trains as the CPU's own loop does up to float rounding (every
// loss, optimizer, activation and depth it takes, L1/L2 and dropout, early stopping), twice the
// same bits for the same pack, a non-finite member alone fails, packs it cannot train keep the
// autograd loop, and a step dispatches at most 20 operators for a 2-hidden-layer pack where
// the autograd loop dispatched ~170.
#include "support/trainer_fixture.h"

#include <cmath>

namespace ens {
namespace {

using namespace ens::testing;

// The pack `specs` trained on `path`; outputs in order.
std::vector<TrainOutputs> TrainOn(Fixture& f, const std::vector<MemberSpec>& specs, TrainPath path,
                                  const std::string& tag, bool count_ops = false) {
  std::vector<TrainInputs> in;
  for (size_t k = 0; k < specs.size(); ++k) {
    TaskSpec& t = f.Task(specs[k], static_cast<int>(k));
    in.push_back(f.Inputs(t, tag));
    in.back().path = path;
    in.back().count_ops = count_ops;
  }
  std::vector<TrainOutputs> out;
  TrainPack(in, &out);
  REQUIRE(out.size() == specs.size());
  return out;
}

MemberSpec Base(int index) {
  MemberSpec m;
  m.name = "m" + std::to_string(1000 + index).substr(1);
  m.layers = {{6, Activation::kSigmoid, 0.0}, {6, Activation::kRelu, 0.0}};
  m.loss = LossKind::kHuber;
  m.huber_delta = 0.35;
  m.epochs = 3;
  m.batch_size = 32;
  m.lr = 3e-3;
  return m;
}

// Predictions, history and epochs of `a` (PackStep) within float rounding of `b` (the CPU loop).
void RequireClose(const TrainOutputs& a, const TrainOutputs& b) {
  INFO(a.status.ToString());
  REQUIRE(a.status.ok());
  REQUIRE(b.status.ok());
  CHECK(a.metrics["epochs_run"] == b.metrics["epochs_run"]);
  REQUIRE(a.holdout_pred.size() == b.holdout_pred.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.holdout_pred.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a.holdout_pred[i]) - b.holdout_pred[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.holdout_pred[i])));
  }
  CAPTURE(worst, scale);
  CHECK(worst <= 1e-3 * std::max(1.0, scale));
  REQUIRE(a.history.size() == b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e)
    for (const char* key : {"loss", "val_loss", "mae", "mse", "val_mae", "val_mse"}) {
      CAPTURE(e, key);
      const double x = a.history[e][key], y = b.history[e][key];
      CHECK(std::abs(x - y) <= 1e-3 * std::max(1.0, std::abs(y)));
    }
}

TEST_CASE("PackStep trains as the CPU loop does, up to float rounding", "[pack_step]") {
  struct Case {
    const char* what;
    void (*change)(MemberSpec&, int);
  };
  const std::vector<Case> cases = {
      {"huber, adam, sigmoid and relu, L1/L2 on some members",
       [](MemberSpec& m, int i) { m.l1 = i == 1 ? 1e-4 : 0.0, m.l2 = i == 2 ? 1e-3 : 0.0; }},
      {"mse, adamw, tanh, one hidden layer, weight decay per member",
       [](MemberSpec& m, int i) {
         m.loss = LossKind::kMse, m.optimizer = OptimizerKind::kAdamW, m.weight_decay = 0.01 * i;
         m.layers = {{8, Activation::kTanh, 0.0}};
       }},
      {"mae, sgd with momentum, gelu and swish and linear, three hidden layers",
       [](MemberSpec& m, int i) {
         m.loss = LossKind::kMae, m.optimizer = OptimizerKind::kSgd, m.momentum = 0.3 * i, m.lr = 1e-2;
         m.weight_decay = i == 1 ? 1e-3 : 0.0;
         m.layers = {{5, Activation::kGelu, 0.0}, {4, Activation::kSwish, 0.0}, {3, Activation::kLinear, 0.0}};
       }},
      {"no hidden layer", [](MemberSpec& m, int) { m.layers = {}; }},
      {"dropout on some members, early stopping with restore_best",
       [](MemberSpec& m, int i) {
         m.layers[0].dropout = i == 1 ? 0.25 : 0.0, m.layers[1].dropout = i == 2 ? 0.1 : 0.0;
         m.epochs = 5, m.early_stopping.enabled = true, m.early_stopping.patience = 0;
         m.early_stopping.restore_best = true, m.early_stopping.min_delta = i == 0 ? 10.0 : 0.0;
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    Fixture f;
    std::vector<MemberSpec> specs;
    for (int i = 0; i < 3; ++i) {
      specs.push_back(Base(i));
      c.change(specs.back(), i);
      specs.back().lr *= 1 + 0.5 * i;
    }
    const auto step = TrainOn(f, specs, TrainPath::kTensorOps, "step", true);
    const auto cpu = TrainOn(f, specs, TrainPath::kByDevice, "cpu");
    for (size_t k = 0; k < specs.size(); ++k) {
      CAPTURE(k);
      RequireClose(step[k], cpu[k]);
    }
    // PackStep trained it: its count is far below the autograd loop's (~170 without dropout;
    // each hidden layer with dropout adds ~50 for its masks, drawn a step at a time).
    const bool dropout = std::string(c.what).find("dropout") != std::string::npos;
    CHECK(step[0].metrics["train_ops_per_step"].get<double>() < (dropout ? 150 : 40));
  }
}

TEST_CASE("PackStep gives the same bits when the same pack trains twice", "[pack_step]") {
  Fixture f;
  std::vector<MemberSpec> specs = {Base(0), Base(1), Base(2)};
  specs[1].layers[0].dropout = 0.2;
  const auto a = TrainOn(f, specs, TrainPath::kTensorOps, "a");
  const auto b = TrainOn(f, specs, TrainPath::kTensorOps, "b");
  for (size_t k = 0; k < specs.size(); ++k) RequireSameBits(f, a[k], b[k], "a-" + specs[k].name + ".pt", "b-" + specs[k].name + ".pt");
}

TEST_CASE("with PackStep a member whose loss turns non-finite fails alone", "[pack_step]") {
  Fixture f;
  std::vector<MemberSpec> specs = {Base(0), Base(1), Base(2)};
  ::setenv("ENSEMBLED_TEST_NONFINITE", "r0-m001", 1);
  const auto out = TrainOn(f, specs, TrainPath::kTensorOps, "nan");
  ::unsetenv("ENSEMBLED_TEST_NONFINITE");
  CHECK(out[0].status.ok());
  CHECK_FALSE(out[1].status.ok());
  CHECK_THAT(out[1].status.message(), Catch::Contains("non-finite"));
  CHECK(out[2].status.ok());
}

TEST_CASE("packs PackStep cannot train keep the autograd loop on the CUDA path", "[pack_step]") {
  Fixture f;
  std::vector<MemberSpec> specs = {Base(0), Base(1)};
  for (auto& s : specs) s.loss = LossKind::kGaussianNll;
  const auto out = TrainOn(f, specs, TrainPath::kTensorOps, "nll", true);
  REQUIRE(out[0].status.ok());
  CHECK(out[0].metrics["train_ops_per_step"].get<double>() > 60);
}

TEST_CASE("a 2-hidden-layer pack's step dispatches at most 20 operators on the CUDA path, the autograd loop's far more",
          "[pack_step]") {
  Fixture f;
  std::vector<MemberSpec> specs;
  for (int i = 0; i < 64; ++i) specs.push_back(Base(i));
  const auto step = TrainOn(f, specs, TrainPath::kTensorOps, "count", true);
  const auto autograd = TrainOn(f, specs, TrainPath::kAutogradOps, "count-ag", true);
  REQUIRE(step[0].status.ok());
  REQUIRE(autograd[0].status.ok());
  const double ops = step[0].metrics["train_ops_per_step"], before = autograd[0].metrics["train_ops_per_step"];
  CAPTURE(ops, before);
  CHECK(ops <= 20);
  CHECK(before > 100);
}

}  // namespace
}  // namespace ens
