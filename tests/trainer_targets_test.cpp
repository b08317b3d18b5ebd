// Several regression targets in the one training loop (data.target_columns): one output per
// target, each target standardised on its own, holdout metrics per target and averaged, a
// checkpoint that returns [n, targets] in target units, and packed members with the bits of
// lone ones.
#include "support/trainer_fixture.h"

namespace ens {
namespace {

using namespace ens::testing;

// 9 -> 24 tanh -> 2, Adam; mse, or Huber (its delta per member) from index 5 on.
MemberSpec TwoOutputs(int index) {
  MemberSpec m;
  m.name = "t" + std::to_string(1000 + index).substr(1);
  m.layers = {{24, Activation::kTanh, index % 2 == 1 ? 0.1 : 0.0}};
  m.loss = index >= 5 ? LossKind::kHuber : LossKind::kMse;
  m.huber_delta = 0.3 + 0.2 * (index % 3);
  m.lr = 3e-3 * (1 + index % 2);
  m.epochs = index == 0 ? 40 : 3 + index % 3;
  m.batch_size = 32;
  return m;
}

// Population std of target t of a table of rows (kFeatures features, then 2 targets).
double TargetStd(const std::vector<float>& table, int t) {
  const size_t w = kFeatures + 2, n = table.size() / w;
  double sum = 0, sq = 0;
  for (size_t r = 0; r < n; ++r) {
    const double y = table[r * w + kFeatures + t];
    sum += y, sq += y * y;
  }
  return std::sqrt(sq / n - (sum / n) * (sum / n));
}

TEST_CASE("a member with two targets learns both, scored per target and on average") {
  Fixture f;
  f.AddTarget();
  auto out = f.Train({0}, TwoOutputs, "alone");
  const TrainOutputs& o = out[0];
  REQUIRE(o.status.ok());
  REQUIRE(o.holdout_pred.size() == 200 * 2);
  REQUIRE(o.pool_pred.size() == 100 * 2);
  const auto& m = o.metrics;
  INFO(m.dump());
  REQUIRE(m["holdout_rmse_per_target"].size() == 2);
  REQUIRE(m["holdout_mae_per_target"].size() == 2);
  const double r0 = m["holdout_rmse_per_target"][0], r1 = m["holdout_rmse_per_target"][1];
  CHECK(m["holdout_rmse"].get<double>() == Approx((r0 + r1) / 2));
  // A constant predictor's RMSE is the target's std: both targets are learned, each on its
  // own scale (the second's std is ~100x the first's, so a shared standardisation would fail one).
  CHECK(r0 < 0.9 * TargetStd(f.holdout, 0));  // a hard sin table (trainer_fixture.h)
  CHECK(r1 < 0.2 * TargetStd(f.holdout, 1));
  // The per-epoch metrics are means over the targets, in target units.
  CHECK(o.history.back()["val_mae"].get<double>() > 0.0);
  REQUIRE(o.norm["y_mean"].size() == 2);
  CHECK(o.norm["y_mean"][1].get<double>() > 200.0);

  // The checkpoint takes raw rows and returns [n, 2] in target units: the holdout predictions.
  auto module = LoadMember(f.dir.File("alone-t000.pt"));
  REQUIRE(module.ok());
  torch::Tensor rows = torch::from_blob(f.holdout.data(), {200, kFeatures + 2}).narrow(1, 0, kFeatures);
  torch::Tensor p = module->forward({rows}).toTensor();
  REQUIRE(p.sizes() == torch::IntArrayRef({200, 2}));
  CHECK(std::memcmp(p.contiguous().data_ptr<float>(), o.holdout_pred.data(), 200 * 2 * sizeof(float)) == 0);
}

TEST_CASE("members with two targets have the same bits packed and alone") {
  Fixture f;
  f.AddTarget();
  auto packed = f.Train({1, 2, 3, 4}, TwoOutputs, "pack");
  auto huber = f.Train({5, 6, 7}, TwoOutputs, "pack");
  packed.insert(huber.begin(), huber.end());
  for (int i : {1, 2, 3, 4, 5, 6, 7}) {
    INFO("member " << i);
    auto alone = f.Train({i}, TwoOutputs, "alone");
    RequireSameBits(f, packed[i], alone[i], "pack-" + TwoOutputs(i).name + ".pt", "alone-" + TwoOutputs(i).name + ".pt");
  }
}

}  // namespace
}  // namespace ens
