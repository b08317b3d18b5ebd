// LaneStep (worker/train/lane_step.h), the CPU's training step for packs of small members, 16 to a
// vector register: a member's bits are the same alone, in packs of 3, 16, 17 and 40 with mixed
// hyperparameters (dropout, L1/L2, early stopping, epochs; relu, sigmoid, swish, gelu and tanh;
// mse, huber, gaussian_nll; adversarial training), in any block position and under
// every ISA the block code is compiled for that this CPU runs; the model it trains is the
// autograd loop's up to float rounding; a non-finite member fails alone; packs it does not fit
// keep the autograd loop.
#include "support/trainer_fixture.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>

#include "worker/kernels/lane_kernel.h"
#include "worker/train/lane_step.h"

namespace ens {
namespace {

using namespace ens::testing;

// Seed-000's shape (9 -> 6 sigmoid -> 1, huber, Adam, batch 32) with every per-member
// hyperparameter varied by index.
MemberSpec Mixed(int index) {
  MemberSpec m;
  m.name = "m" + std::to_string(1000 + index).substr(1);
  m.layers = {{6, Activation::kSigmoid, index % 5 == 1 ? 0.2 : 0.0}};
  m.loss = LossKind::kHuber;
  m.huber_delta = 0.2 + 0.1 * (index % 4);
  m.batch_size = 32;
  m.lr = 1e-3 * (1 + index % 3);
  m.l1 = index % 3 == 0 ? 0.0 : 1e-4;
  m.l2 = index % 2 == 0 ? 0.0 : 1e-3;
  m.epochs = 2 + index % 3;
  m.early_stopping.enabled = index % 4 == 2;
  m.early_stopping.patience = 0;
  m.early_stopping.min_delta = index % 8 == 2 ? 10.0 : 0.0;
  m.early_stopping.restore_best = index % 8 != 6;
  return m;
}

// Two hidden layers (relu, swish), mse, SGD with momentum: the kernel's other paths.
MemberSpec Deep(int index) {
  MemberSpec m = Mixed(index);
  m.layers = {{5, Activation::kRelu, index % 3 == 2 ? 0.1 : 0.0}, {4, Activation::kSwish, 0.0}};
  m.loss = LossKind::kMse;
  m.optimizer = OptimizerKind::kSgd;
  m.momentum = 0.2 * (index % 4);
  m.weight_decay = index % 2 == 0 ? 1e-3 : 0.0;
  m.lr = 5e-3;
  return m;
}

// Gaussian heads (gaussian_nll: mean and variance outputs) on gelu and tanh layers: the
// kernel's own erf, tanh, ln and softplus.
MemberSpec Gaussian(int index) {
  MemberSpec m = Mixed(index);
  m.layers = {{8, Activation::kGelu, index % 5 == 1 ? 0.2 : 0.0}, {4, Activation::kTanh, 0.0}};
  m.loss = LossKind::kGaussianNll;
  return m;
}

// The UCI protocol's members: a gaussian head with fast-gradient-sign adversarial training (and
// dropout for some: the adversarial forward's masks are its own).
MemberSpec Adversarial(int index) {
  MemberSpec m = Mixed(index);
  m.layers = {{10, Activation::kRelu, index % 5 == 1 ? 0.2 : 0.0}};
  m.loss = LossKind::kGaussianNll;
  m.adversarial_eps = 0.01 * (1 + index % 2);
  return m;
}

std::vector<TrainOutputs> TrainOn(Fixture& f, const std::vector<int>& indices, MemberSpec (*make)(int), TrainPath path,
                                  const std::string& tag, bool count_ops = false) {
  std::vector<TrainInputs> in;
  for (int i : indices) {
    in.push_back(f.Inputs(f.Task(make(i), i), tag));
    in.back().path = path;
    in.back().count_ops = count_ops;
  }
  std::vector<TrainOutputs> out;
  TrainPack(in, &out);
  REQUIRE(out.size() == indices.size());
  return out;
}

std::string Checkpoint(const std::string& tag, int i) { return tag + "-m" + std::to_string(1000 + i).substr(1) + ".pt"; }

TEST_CASE("a lane-trained member has the same bits alone, in packs of 3, 16, 17 and 40 and in any block position",
          "[lane_step][pack]") {
  for (MemberSpec (*make)(int) : {Mixed, Deep, Gaussian, Adversarial}) {
    Fixture f;
    std::vector<int> forty(40), seventeen, sixteen;
    for (int i = 0; i < 40; ++i) forty[i] = i;
    for (int i = 20; i >= 4; --i) seventeen.push_back(i);  // member 4 at position 16: a block of its own
    for (int i = 0; i < 16; ++i) sixteen.push_back((i * 7 + 3) % 40);
    const auto p40 = TrainOn(f, forty, make, TrainPath::kByDevice, "p40");
    const auto p17 = TrainOn(f, seventeen, make, TrainPath::kByDevice, "p17");
    const auto p16 = TrainOn(f, sixteen, make, TrainPath::kByDevice, "p16");
    const auto p3 = TrainOn(f, {33, 4, 17}, make, TrainPath::kByDevice, "p3");
    // The lane path trained them: without dropout (whose masks the model draws with tensor ops)
    // under one operator a step for the window's bookkeeping, where the autograd loop
    // dispatched dozens.
    const auto counted = TrainOn(f, {0, 3}, make, TrainPath::kByDevice, "ops", true);
    CHECK(counted[0].metrics["train_ops_per_step"].get<double>() < 1.0);
    auto position = [](const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) - v.begin(); };
    for (int i : {4, 17, 33}) {
      CAPTURE(i);
      const auto alone = TrainOn(f, {i}, make, TrainPath::kByDevice, "alone");
      RequireSameBits(f, alone[0], p40[i], Checkpoint("alone", i), Checkpoint("p40", i));
      RequireSameBits(f, alone[0], p3[position({33, 4, 17}, i)], Checkpoint("alone", i), Checkpoint("p3", i));
      if (i <= 20) RequireSameBits(f, alone[0], p17[position(seventeen, i)], Checkpoint("alone", i), Checkpoint("p17", i));
      const auto at = position(sixteen, i);
      if (at < 16) RequireSameBits(f, alone[0], p16[at], Checkpoint("alone", i), Checkpoint("p16", i));
    }
    // Early stopping is per member: some stopped before their budget, the others did not.
    int stopped_early = 0;
    for (int i = 0; i < 40; ++i)
      stopped_early += p40[i].metrics["epochs_run"].get<int>() < make(i).epochs ? 1 : 0;
    CHECK(stopped_early > 0);
    CHECK(stopped_early < 40);
    CHECK(p40[0].holdout_pred != p40[1].holdout_pred);
  }
}

TEST_CASE("every ISA the lane kernel is compiled for gives the same bits", "[lane_step][bits]") {
  Fixture f;
  std::vector<int> pack(17);
  for (int i = 0; i < 17; ++i) pack[i] = i;
  const auto isas = AvailableLaneIsas();
  CAPTURE(isas.size());
  std::vector<std::vector<TrainOutputs>> runs;
  for (LaneIsa isa : isas) {
    ::setenv("ENSEMBLED_LANE_ISA", Name(isa), 1);
    REQUIRE(ChosenLaneIsa() == isa);
    runs.push_back(TrainOn(f, pack, Mixed, TrainPath::kByDevice, Name(isa)));
  }
  ::unsetenv("ENSEMBLED_LANE_ISA");
  for (size_t r = 1; r < runs.size(); ++r)
    for (int i : {0, 1, 2, 9, 16}) {
      CAPTURE(Name(isas[r]), i);
      RequireSameBits(f, runs[0][i], runs[r][i], Checkpoint(Name(isas[0]), i), Checkpoint(Name(isas[r]), i));
    }
}

TEST_CASE("the lane path trains the autograd loop's model up to float rounding", "[lane_step]") {
  for (MemberSpec (*make)(int) : {Mixed, Deep, Gaussian, Adversarial}) {
    Fixture f;
    const std::vector<int> pack = {0, 1, 2, 3, 5};
    const auto lanes = TrainOn(f, pack, make, TrainPath::kByDevice, "lanes");
    const auto autograd = TrainOn(f, pack, make, TrainPath::kAutogradOps, "autograd");
    for (size_t k = 0; k < pack.size(); ++k) {
      CAPTURE(pack[k]);
      REQUIRE(lanes[k].status.ok());
      REQUIRE(autograd[k].status.ok());
      CHECK(lanes[k].metrics["epochs_run"] == autograd[k].metrics["epochs_run"]);
      auto a = LoadMember(f.dir.File(Checkpoint("lanes", pack[k]))), b = LoadMember(f.dir.File(Checkpoint("autograd", pack[k])));
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      const NamedTensors ta = MemberBuffers(*a), tb = MemberBuffers(*b);
      REQUIRE(ta.size() == tb.size());
      for (size_t t = 0; t < ta.size(); ++t) {
        CAPTURE(ta[t].first);
        const double scale = std::max(1e-3, tb[t].second.abs().max().item<double>());
        const double diff = (ta[t].second - tb[t].second).abs().max().item<double>();
        CAPTURE(diff, scale);
        CHECK(diff <= 1e-4 * scale);
      }
      for (size_t e = 0; e < lanes[k].history.size(); ++e)
        for (const char* key : {"loss", "mae", "mse", "val_loss"}) {
          CAPTURE(e, key);
          const double x = lanes[k].history[e][key], y = autograd[k].history[e][key];
          CHECK(std::abs(x - y) <= 1e-4 * std::max(1.0, std::abs(y)));
        }
    }
  }
}

TEST_CASE("with the lane path a member whose loss turns non-finite fails alone", "[lane_step]") {
  Fixture f;
  ::setenv("ENSEMBLED_TEST_NONFINITE", "r0-m017", 1);
  const auto out = TrainOn(f, {16, 17, 18, 40}, Mixed, TrainPath::kByDevice, "nan");
  ::unsetenv("ENSEMBLED_TEST_NONFINITE");
  CHECK(out[0].status.ok());
  CHECK_FALSE(out[1].status.ok());
  CHECK_THAT(out[1].status.message(), Catch::Contains("non-finite"));
  CHECK(out[2].status.ok());
  CHECK(out[3].status.ok());
  const auto alone = TrainOn(f, {18}, Mixed, TrainPath::kByDevice, "alone");
  RequireSameBits(f, alone[0], out[2], Checkpoint("alone", 18), Checkpoint("nan", 18));
}

TEST_CASE("which packs the lane path fits - the others keep the autograd loop", "[lane_step]") {
  std::vector<MemberSpec> specs(2, Mixed(0));
  std::vector<const MemberSpec*> p = {&specs[0], &specs[1]};
  CHECK(LaneStepFits(p, 0, 1, 9));
  CHECK_FALSE(LaneStepFits(p, 3, 1, 9));   // a classifier
  CHECK_FALSE(LaneStepFits(p, 0, 2, 9));   // two targets
  CHECK_FALSE(LaneStepFits(p, 0, 1, 853));  // 853 x 6 + 6 weights > kLaneMaxWeights
  CHECK(LaneStepFits(p, 0, 1, 852));
  specs[1].model.kind = ModelKind::kTorchscript;
  CHECK_FALSE(LaneStepFits(p, 0, 1, 9));
  specs[1] = Mixed(1);  // dropout 0.2
  specs[1].adversarial_eps = 0.01;
  CHECK(LaneStepFits(p, 0, 1, 9));
  specs[1] = Mixed(1);
  for (Activation a : {Activation::kTanh, Activation::kGelu, Activation::kLinear}) {
    specs[1].layers[0].activation = a;
    CHECK(LaneStepFits(p, 0, 1, 9));
  }
  specs[1].loss = LossKind::kGaussianNll;
  CHECK(LaneStepFits(p, 0, 1, 9));
  CHECK_FALSE(LaneStepFits(p, 0, 1, 852));  // 852 x 6 + 6 x 2 outputs > kLaneMaxWeights
  CHECK(LaneStepFits(p, 0, 1, 851));
}

}  // namespace
}  // namespace ens
