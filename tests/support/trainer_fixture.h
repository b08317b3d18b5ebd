// The trainer in-process (tests/trainer_*_test.cpp): a fixed regression table, its
// three-class variant, a scratch directory, the fixture that makes a member's task and inputs
// as the task runner does and trains packs, and the bitwise comparison of two members.
// Includes libtorch first: catch's CHECK must win over libtorch's.
#pragma once

#include "worker/train/trainer.h"

#include "worker/predict/checkpoint.h"
#undef CHECK
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/base/seed.h"

namespace ens::testing {

constexpr int kFeatures = 9;

// A fixed regression table (rows of kFeatures features, then the target).
inline std::vector<float> Table(int rows, uint64_t seed) {
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
inline std::vector<float> Classes(std::vector<float> t) {
  for (size_t i = 0; i < t.size(); i += kFeatures + 1) {
    const float* x = &t[i];
    const float score[3] = {x[0] + x[1], x[2] - x[0], x[3] + 0.5f * x[4] - x[1]};
    t[i + kFeatures] = static_cast<float>(std::max_element(score, score + 3) - score);
  }
  return t;
}

// The same table with a second target on another scale: 100 (x0 + 0.5 x1) + 300 + noise,
// rows of kFeatures features then both targets.
inline std::vector<float> TwoTargets(const std::vector<float>& t, uint64_t seed) {
  SeededRng rng(seed);
  std::vector<float> out;
  for (size_t i = 0; i < t.size(); i += kFeatures + 1) {
    out.insert(out.end(), t.begin() + static_cast<std::ptrdiff_t>(i), t.begin() + static_cast<std::ptrdiff_t>(i + kFeatures + 1));
    out.push_back(static_cast<float>(100.0 * (t[i] + 0.5 * t[i + 1]) + 300.0 + 2.0 * rng.Normal()));
  }
  return out;
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
  int targets = 1;  // 2 after AddTarget()

  void Classify() {
    for (auto* t : {&train, &holdout, &pool}) *t = Classes(*t);
    classes = 3;
  }
  void AddTarget() {
    uint64_t seed = 11;
    for (auto* t : {&train, &holdout, &pool}) *t = TwoTargets(*t, seed++);
    targets = 2;
  }

  TaskSpec& Task(const MemberSpec& spec, int index) {
    TaskSpec& t = tasks[index];
    t.task_id = "r0-" + spec.name;
    t.member_index = index;
    t.seed = MemberSeed(7, index, 0);
    t.rows = train.size() / (kFeatures + targets);
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
    in.targets = targets;
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
  // `setup`, when given, changes each task before its inputs are made (a later round).
  std::map<int, TrainOutputs> Train(const std::vector<int>& indices, MemberSpec (*make)(int), const std::string& tag,
                                    const std::function<void(TaskSpec&)>& setup = {}) {
    std::vector<TrainInputs> in;
    for (int i : indices) {
      TaskSpec& t = Task(make(i), i);
      if (setup) setup(t);
      in.push_back(Inputs(t, tag));
    }
    std::vector<TrainOutputs> out;
    TrainPack(in, &out);
    REQUIRE(out.size() == indices.size());
    std::map<int, TrainOutputs> by_index;
    for (size_t k = 0; k < indices.size(); ++k) by_index[indices[k]] = out[k];
    return by_index;
  }
};

// The seed-000 model: 9 -> 6 sigmoid -> 1, Huber 0.35, L1 1e-5, L2 1e-4, Adam.
inline MemberSpec Seed000(int index) {
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

// History without its timings.
inline std::vector<nlohmann::json> Untimed(std::vector<nlohmann::json> h) {
  for (auto& e : h) e.erase("seconds");
  return h;
}

// Two member modules hold the same buffers (and "net" tensors), name for name and bit for bit.
inline void RequireSameBuffers(const torch::jit::Module& ma, const torch::jit::Module& mb) {
  NamedTensors ta = MemberBuffers(ma), tb = MemberBuffers(mb);
  REQUIRE(ta.size() == tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    INFO(ta[i].first);
    CHECK(ta[i].first == tb[i].first);
    CHECK(ta[i].second.sizes() == tb[i].second.sizes());
    CHECK(std::memcmp(ta[i].second.data_ptr(), tb[i].second.data_ptr(), ta[i].second.nbytes()) == 0);
  }
}

inline void RequireSameBits(Fixture& f, const TrainOutputs& a, const TrainOutputs& b, const std::string& ca,
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
  RequireSameBuffers(*ma, *mb);
}

}  // namespace ens::testing
