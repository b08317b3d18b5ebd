// The one training loop in-process: a member's bits do not depend on its pack (size, mates,
// position, their hyperparameters), per-member early stopping and epochs, and libtorch
// errors that become task failures instead of aborts.
#include "worker/trainer.h"

// libtorch's logging defines a CHECK macro; Catch's must win, so torch comes first.
#include "worker/checkpoint.h"
#undef CHECK
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include <stdlib.h>

#include "common/seed.h"

namespace ens {
namespace {

constexpr int kFeatures = 9;

// A fixed regression table (rows of kFeatures features, then the target).
std::vector<float> Table(int rows, uint64_t seed) {
  SeededRng rng(seed);
  std::vector<float> t;
  for (int r = 0; r < rows; ++r) {
    double y = 0;
    for (int f = 0; f < kFeatures; ++f) {
      float x = static_cast<float>(rng.Normal());
      t.push_back(x);
      y += std::sin(x * (f + 1)) * (f % 3 == 0 ? 2.0 : 0.5);
    }
    t.push_back(static_cast<float>(y + 0.1 * rng.Normal()));
  }
  return t;
}

// The same table's features with a class per row: the largest of three linear scores of the
// features (about a third each), a class index for classifiers.
std::vector<float> Classes(std::vector<float> t) {
  for (size_t i = 0; i < t.size(); i += kFeatures + 1) {
    const float* x = &t[i];
    const float score[3] = {x[0] + x[1], x[2] - x[0], x[3] + 0.5f * x[4] - x[1]};
    t[i + kFeatures] = static_cast<float>(std::max_element(score, score + 3) - score);
  }
  return t;
}

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

// The seed-000 model: 9 -> 6 sigmoid -> 1, Huber 0.35, L1 1e-5, L2 1e-4, Adam.
MemberSpec Seed000(int index) {
  MemberSpec m;
  m.name = "m" + std::to_string(1000 + index).substr(1);
  m.layers = {{6, Activation::kSigmoid, 0.0}};
  m.loss = LossKind::kHuber;
  m.huber_delta = 0.35;
  m.l1 = 1e-5;
  m.l2 = 1e-4;
  m.epochs = 4;
  m.batch_size = 32;
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

// A scratch directory. Not tests/support/temp_dir.h: it uses std::filesystem, and libtorch.so
// exports its own (ABI-incompatible) std::filesystem symbols that win at link time here.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/ens-trainer-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~ScratchDir() { (void)std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct Fixture {
  explicit Fixture(int train_rows = 800) : train(Table(train_rows, 1)) {}
  ScratchDir dir;
  std::vector<float> train, holdout = Table(200, 2), pool = Table(100, 3);
  std::map<int, TaskSpec> tasks;
  int classes = 0;  // 3 after Classify()

  void Classify() {
    for (auto* t : {&train, &holdout, &pool}) *t = Classes(*t);
    classes = 3;
  }

  TaskSpec& Task(const MemberSpec& spec, int index) {
    TaskSpec& t = tasks[index];
    t.task_id = "r0-" + spec.name;
    t.member_index = index;
    t.seed = MemberSeed(7, index, 0);
    t.rows = train.size() / (kFeatures + 1);
    t.data_dir = dir.path();
    t.classes = classes;
    t.member = spec;
    return t;
  }

  // The member's inputs; its split from its own seed, as the task runner makes it.
  TrainInputs Inputs(const TaskSpec& t, const std::string& tag) {
    TrainInputs in;
    in.task = &t;
    in.rows = train.data();
    in.features = kFeatures;
    auto split = MemberRows::Make(t);
    REQUIRE(split.ok());
    in.split = std::move(*split);
    in.holdout = holdout.data();
    in.holdout_rows = 200;
    in.pool = pool.data();
    in.pool_rows = 100;
    in.checkpoint_path = dir.File(tag + "-" + t.member.name + ".pt");
    return in;
  }

  // Trains members `indices` (spec from make) as one pack; outputs by member index.
  std::map<int, TrainOutputs> Train(const std::vector<int>& indices, MemberSpec (*make)(int), const std::string& tag) {
    std::vector<TrainInputs> in;
    for (int i : indices) in.push_back(Inputs(Task(make(i), i), tag));
    std::vector<TrainOutputs> out;
    TrainPack(in, &out);
    REQUIRE(out.size() == indices.size());
    std::map<int, TrainOutputs> by_index;
    for (size_t k = 0; k < indices.size(); ++k) by_index[indices[k]] = out[k];
    return by_index;
  }
};

// History without its timings.
std::vector<nlohmann::json> Untimed(std::vector<nlohmann::json> h) {
  for (auto& e : h) e.erase("seconds");
  return h;
}

void RequireSameBits(Fixture& f, const TrainOutputs& a, const TrainOutputs& b, const std::string& ca,
                     const std::string& cb) {
  REQUIRE(a.status.ok());
  REQUIRE(b.status.ok());
  CHECK(a.holdout_pred == b.holdout_pred);  // float ==: NaN would fail, -0 vs 0 is caught below
  CHECK(std::memcmp(a.holdout_pred.data(), b.holdout_pred.data(), a.holdout_pred.size() * 4) == 0);
  CHECK(std::memcmp(a.pool_pred.data(), b.pool_pred.data(), a.pool_pred.size() * 4) == 0);
  CHECK(Untimed(a.history) == Untimed(b.history));
  CHECK(a.metrics["epochs_run"] == b.metrics["epochs_run"]);
  CHECK(a.metrics["stop_step"] == b.metrics["stop_step"]);
  auto ma = LoadMember(f.dir.File(ca)), mb = LoadMember(f.dir.File(cb));
  REQUIRE(ma.ok());
  REQUIRE(mb.ok());
  NamedTensors ta = MemberBuffers(*ma), tb = MemberBuffers(*mb);
  REQUIRE(ta.size() == tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    INFO(ta[i].first);
    CHECK(ta[i].first == tb[i].first);
    CHECK(ta[i].second.sizes() == tb[i].second.sizes());
    CHECK(std::memcmp(ta[i].second.data_ptr(), tb[i].second.data_ptr(), ta[i].second.nbytes()) == 0);
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
