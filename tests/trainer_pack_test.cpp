// The one training loop in-process: a member's bits do not depend on its pack (size, mates,
// position, their hyperparameters), per-member early stopping and epochs, and libtorch
// errors that become task failures instead of aborts.
#include "support/trainer_fixture.h"

namespace ens {
namespace {

using namespace ens::testing;

// A classifier: 9 -> 12 tanh -> 3 logits, cross-entropy with label smoothing that differs
// per member, dropout on some.
MemberSpec Classifier(int index) {
  MemberSpec m;
  m.name = "c" + std::to_string(1000 + index).substr(1);
  m.layers = {{12, Activation::kTanh, index % 3 == 1 ? 0.2 : 0.0}};
  m.loss = LossKind::kCrossEntropy;
  m.label_smoothing = index % 2 == 0 ? 0.0 : 0.1;
  m.lr = 3e-3;
  m.epochs = 4;
  return m;
}

// A member whose every per-member hyperparameter differs from Seed000's, by index.
MemberSpec Mixed(int index) {
  MemberSpec m = Seed000(index);
  m.lr = 1e-3 * (1 + index % 4);
  m.l1 = index % 3 == 0 ? 0.0 : 1e-4 * index;
  m.l2 = index % 2 == 0 ? 0.0 : 1e-3;
  m.huber_delta = 0.2 + 0.1 * (index % 5);
  m.layers[0].dropout = index % 4 == 1 ? 0.25 : 0.0;
  m.epochs = 3 + index % 4;
  m.split = index % 5 == 2 ? SplitKind::kBootstrap : SplitKind::kRandom;
  m.early_stopping.enabled = index % 3 == 1;
  m.early_stopping.patience = index % 2;
  m.early_stopping.min_delta = index % 6 == 1 ? 10.0 : 0.0;
  m.early_stopping.restore_best = index % 4 != 3;
  return m;
}

// Wider layers than seed-000's: a batched matrix product (bmm) gave these packed members other
// last bits than lone ones; per-member products on aligned slices do not.
MemberSpec Wide(int index) {
  MemberSpec m = Seed000(index);
  m.layers = index % 2 == 0 ? std::vector<LayerSpec>{{16, Activation::kTanh, 0.0}}
                            : std::vector<LayerSpec>{{32, Activation::kRelu, 0.0}, {32, Activation::kRelu, 0.1}};
  m.optimizer = index % 4 < 2 ? OptimizerKind::kAdam : OptimizerKind::kSgd;
  m.momentum = 0.5;
  return m;
}

TEST_CASE("members with 16 and 32 hidden units have the same bits alone and in packs of 2 and 5", "[trainer][pack]") {
  Fixture f;
  // Same architecture and optimizer per pack (PackKey): indices 0, 4, 8, 12, 16 / 2, 6 / 1, 5.
  for (const std::vector<int>& pack : {std::vector<int>{0, 4, 8, 12, 16}, std::vector<int>{2, 6},
                                       std::vector<int>{1, 5}}) {
    auto packed = f.Train(pack, Wide, "p");
    for (int i : {pack.front(), pack.back()}) {
      auto alone = f.Train({i}, Wide, "a");
      INFO("member " << i << " in a pack of " << pack.size());
      const std::string name = "m" + std::to_string(1000 + i).substr(1) + ".pt";
      RequireSameBits(f, alone[i], packed[i], "a-" + name, "p-" + name);
    }
  }
}

TEST_CASE("a seed-000 member has the same bits alone and in packs of 3, 8 and 64", "[trainer][pack]") {
  Fixture f;
  std::vector<int> all(64);
  for (int i = 0; i < 64; ++i) all[i] = i;
  auto p64 = f.Train(all, Seed000, "p64");
  auto p8 = f.Train({5, 0, 1, 2, 3, 4, 6, 7}, Seed000, "p8");
  auto p3 = f.Train({63, 5, 17}, Seed000, "p3");
  for (int i : {0, 5, 17, 63}) {
    INFO("member " << i);
    auto alone = f.Train({i}, Seed000, "alone");
    std::string name = Seed000(i).name;
    RequireSameBits(f, alone[i], p64[i], "alone-" + name + ".pt", "p64-" + name + ".pt");
    if (p8.count(i)) RequireSameBits(f, alone[i], p8[i], "alone-" + name + ".pt", "p8-" + name + ".pt");
    if (p3.count(i)) RequireSameBits(f, alone[i], p3[i], "alone-" + name + ".pt", "p3-" + name + ".pt");
  }
  // Different members really differ (the comparison above is not vacuous).
  CHECK(p64[0].holdout_pred != p64[1].holdout_pred);
}

TEST_CASE("classifiers have the same bits alone and packed, and learn the classes", "[trainer][pack][classification]") {
  Fixture f;
  f.Classify();
  auto packed = f.Train({0, 1, 2, 3, 4, 5, 6, 7}, Classifier, "p8");
  for (int i : {0, 1, 4}) {
    INFO("member " << i);
    auto alone = f.Train({i}, Classifier, "alone");
    std::string name = Classifier(i).name;
    RequireSameBits(f, alone[i], packed[i], "alone-" + name + ".pt", "p8-" + name + ".pt");
  }
  const TrainOutputs& o = packed[0];
  REQUIRE(o.holdout_pred.size() == 200 * 3);  // a probability per class and row
  for (size_t r = 0; r < 200; ++r) {
    const float sum = o.holdout_pred[3 * r] + o.holdout_pred[3 * r + 1] + o.holdout_pred[3 * r + 2];
    CHECK(sum == Approx(1.0f).epsilon(1e-5));
  }
  for (const char* key : {"accuracy", "nll", "brier", "val_accuracy", "val_nll", "val_brier"})
    CHECK(o.history.back().contains(key));
  // Each class is about a third of the rows: a model that learned nothing scores that.
  auto trained = f.Train({9}, [](int i) {
    MemberSpec m = Classifier(i);
    m.epochs = 40;
    return m;
  }, "long");
  INFO(trained[9].metrics.dump());
  CHECK(trained[9].metrics["holdout_accuracy"].get<double>() > 0.85);
  CHECK(trained[9].metrics["holdout_nll"].get<double>() < 0.5 * std::log(3.0));  // a uniform guess: ln 3
  CHECK(trained[9].metrics["holdout_brier"].get<double>() < 0.3);                 // a uniform guess: 2/3
  CHECK_FALSE(trained[9].metrics.contains("holdout_rmse"));
}

TEST_CASE("Gaussian heads have the same bits alone and packed and learn a variance", "[trainer][pack][gaussian]") {
  Fixture f;
  auto make = [](int i) {
    MemberSpec m = Mixed(i);
    m.loss = LossKind::kGaussianNll;
    return m;
  };
  auto packed = f.Train({0, 1, 2, 3, 4, 5}, make, "p6");
  for (int i : {0, 3, 5}) {
    INFO("member " << i);
    auto alone = f.Train({i}, make, "alone");
    std::string name = make(i).name;
    RequireSameBits(f, alone[i], packed[i], "alone-" + name + ".pt", "p6-" + name + ".pt");
  }
  auto trained = f.Train({7}, [](int i) {
    MemberSpec m = Seed000(i);
    m.loss = LossKind::kGaussianNll;
    m.layers = {{32, Activation::kTanh, 0.0}};
    m.epochs = 60;
    m.lr = 3e-3;
    m.early_stopping.enabled = true;  // the table is small: keep the best epoch, not the overfit last
    m.early_stopping.patience = 5;
    return m;
  }, "long");
  const TrainOutputs& o = trained[7];
  INFO(o.metrics.dump());
  REQUIRE(o.holdout_pred.size() == 200 * 2);  // a mean and a variance per row
  double mean_var = 0, var_y = 0, mean_y = 0;
  for (size_t r = 0; r < 200; ++r) {
    CHECK(o.holdout_pred[2 * r + 1] > 0.0f);
    mean_var += o.holdout_pred[2 * r + 1] / 200;
    mean_y += f.holdout[r * (kFeatures + 1) + kFeatures] / 200;
  }
  for (size_t r = 0; r < 200; ++r) {
    const double d = f.holdout[r * (kFeatures + 1) + kFeatures] - mean_y;
    var_y += d * d / 200;
  }
  // The predicted variance is of the residuals: below the target's own, and near the squared
  // error it makes (a calibrated head; within a factor of 2 either way).
  const double mse = std::pow(o.metrics["holdout_rmse"].get<double>(), 2);
  CHECK(mean_var < var_y);
  CHECK(mean_var > mse / 2);
  CHECK(mean_var < mse * 2);
  CHECK(o.metrics["holdout_rmse"].get<double>() < std::sqrt(var_y));
  // N(y; mean of y, var of y) would score 0.5 log(2 pi e var_y); the head does better.
  CHECK(o.metrics["holdout_nll"].get<double>() < 0.5 * std::log(2 * M_PI * std::exp(1.0) * var_y));
}

TEST_CASE("on a table too big for row lists (keyed rows) a member has the same bits alone and packed",
          "[trainer][pack]") {
  // More than kListedRowsMax rows: splits and epoch orders are computed, not held, and the
  // pack's index windows (kIndexWindowBytes) hold fewer batches than the lone member's.
  // Batch 32 and one epoch, as in the cases above: see ARCHITECTURE.md on larger batches.
  Fixture f(static_cast<int>(MemberRows::kListedRowsMax) + 3000);
  auto make = [](int i) {
    MemberSpec m = Seed000(i);
    m.epochs = 1;
    m.batch_size = 32;
    m.validation_split = 0.05;
    m.split = i == 2 ? SplitKind::kBootstrap : SplitKind::kRandom;
    return m;
  };
  auto packed = f.Train({0, 1, 2}, make, "pack");
  REQUIRE_FALSE(f.Inputs(f.tasks[0], "probe").split.listed());
  auto alone = f.Train({2}, make, "alone");  // the bootstrap member: split, draws and orders all keyed
  RequireSameBits(f, alone[2], packed[2], "alone-m002.pt", "pack-m002.pt");
  CHECK(packed[0].holdout_pred != packed[1].holdout_pred);
}

TEST_CASE("members with mixed hyperparameters have the same bits alone and packed", "[trainer][pack]") {
  Fixture f;
  std::vector<int> idx = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  auto packed = f.Train(idx, Mixed, "pack");
  for (int i : idx) {
    INFO("member " << i);
    auto alone = f.Train({i}, Mixed, "alone");
    std::string name = Mixed(i).name;
    RequireSameBits(f, alone[i], packed[i], "alone-" + name + ".pt", "pack-" + name + ".pt");
  }
}

TEST_CASE("each member of a pack keeps its own early stopping and epochs", "[trainer][pack]") {
  Fixture f;
  auto make = [](int i) {
    MemberSpec m = Seed000(i);
    m.epochs = 30;
    if (i == 1) {  // strict: no improvement of 10 is ever seen after the first epoch
      m.early_stopping.enabled = true;
      m.early_stopping.patience = 0;
      m.early_stopping.min_delta = 10;
    }
    if (i == 2) m.epochs = 5;
    return m;
  };
  auto out = f.Train({0, 1, 2}, +make, "pack");
  CHECK(out[0].metrics["epochs_run"] == 30);
  CHECK(out[1].metrics["epochs_run"] == 2);
  CHECK(out[1].history.size() == 2);
  CHECK(out[2].metrics["epochs_run"] == 5);
  CHECK(out[1].metrics["stop_step"].get<int64_t>() < out[0].metrics["stop_step"].get<int64_t>());
}

TEST_CASE("a member whose loss turns non-finite fails alone - its mates keep their bits", "[trainer][pack]") {
  Fixture f;
  ::setenv("ENSEMBLED_TEST_NONFINITE", "r0-m001", 1);
  auto packed = f.Train({0, 1, 2}, Seed000, "pack");
  ::unsetenv("ENSEMBLED_TEST_NONFINITE");
  CHECK_FALSE(packed[1].status.ok());
  CHECK(packed[1].permanent_failure);
  CHECK_THAT(packed[1].status.message(), Catch::Contains("non-finite"));
  auto alone = f.Train({2}, Seed000, "alone");
  RequireSameBits(f, alone[2], packed[2], "alone-m002.pt", "pack-m002.pt");
}

TEST_CASE("a libtorch error fails the task with its message instead of aborting", "[trainer][errors]") {
  Fixture f;
  ::setenv("ENSEMBLED_TEST_TORCH_ERROR", "r0-m001", 1);
  auto out = f.Train({0, 1}, Seed000, "pack");
  ::unsetenv("ENSEMBLED_TEST_TORCH_ERROR");
  for (int i : {0, 1}) {
    CHECK_FALSE(out[i].status.ok());
    CHECK(out[i].permanent_failure);
    CHECK_THAT(out[i].status.message(), Catch::Contains("shapes cannot be multiplied"));
  }
  auto after = f.Train({0}, Seed000, "after");  // the process is still usable
  CHECK(after[0].status.ok());
}

TEST_CASE("out of memory splits the pack in halves with the same bits", "[trainer][errors]") {
  Fixture f;
  std::vector<std::string> notes;
  std::vector<int> idx = {0, 1, 2, 3, 4};
  std::vector<TrainInputs> in;
  for (int i : idx) in.push_back(f.Inputs(f.Task(Seed000(i), i), "split"));
  in[0].on_note = [&](const std::string& n) { notes.push_back(n); };
  ::setenv("ENSEMBLED_TEST_OOM_ABOVE", "2", 1);
  std::vector<TrainOutputs> out;
  TrainPack(in, &out);
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
  REQUIRE(out.size() == 5);
  REQUIRE_FALSE(notes.empty());
  CHECK_THAT(notes[0], Catch::Contains("pack of 5 ran out of memory"));
  auto whole = f.Train(idx, Seed000, "whole");
  for (int i : idx) RequireSameBits(f, whole[i], out[i], "whole-" + Seed000(i).name + ".pt", "split-" + Seed000(i).name + ".pt");

  ::setenv("ENSEMBLED_TEST_OOM_ABOVE", "0", 1);  // not even one member fits
  auto none = f.Train({0}, Seed000, "none");
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
  CHECK_FALSE(none[0].status.ok());
  CHECK_THAT(none[0].status.message(), Catch::Contains("does not fit in memory alone"));
}

}  // namespace
}  // namespace ens
