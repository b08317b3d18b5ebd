// A lane member's predictions (issue 61 item 2): with its task's lane_predictions, a member the
// lane kernel trains predicts with the kernel's forward (model.h UseLaneForward): its saved
// module runs the same operations (lane_forward_source.h) and gives its holdout and pool
// predictions' bits, packed or alone, for a regression and a Gaussian head; without the flag
// (a task recorded before) the same trained member predicts through its layers' GEMMs, as it
// always did, so verify retrains an old round to the predictions it recorded. Members the
// lanes do not take (classification) ignore the flag.
#include "support/trainer_fixture.h"

namespace ens {
namespace {

using namespace ens::testing;

MemberSpec GaussianTanh(int index) {
  MemberSpec m = Seed000(index);
  m.layers = {{7, Activation::kTanh, 0.0}, {5, Activation::kGelu, 0.0}};
  m.loss = LossKind::kGaussianNll;
  return m;
}

MemberSpec Classifier(int index) {
  MemberSpec m = Seed000(index);
  m.loss = LossKind::kCrossEntropy;
  return m;
}

void SetLanePredictions(TaskSpec& t) { t.lane_predictions = true; }
void SetGemmPredictions(TaskSpec& t) { t.lane_predictions = false; }  // the fixture keeps its tasks


// The module saved at `file` predicts rows [n, F + targets] of `table` to `expected`'s bits.
void RequireModulePredicts(Fixture& f, const std::string& file, const std::vector<float>& table, int64_t rows,
                           const std::vector<float>& expected) {
  auto module = LoadMember(f.dir.File(file));
  REQUIRE(module.ok());
  torch::Tensor x = torch::from_blob(const_cast<float*>(table.data()), {rows, kFeatures + f.targets}).narrow(1, 0, kFeatures);
  const std::vector<float> p = PredictRows(*module, x);
  REQUIRE(p.size() == expected.size());
  CHECK(std::memcmp(p.data(), expected.data(), p.size() * sizeof(float)) == 0);
}

TEST_CASE("a lane member predicts with the lane forward: its module, packed and alone, gives the same bits", "[trainer][prediction][lanes]") {
  for (MemberSpec (*make)(int) : {&Seed000, &GaussianTanh}) {
    Fixture f;
    auto packed = f.Train({0, 1, 2}, make, "packed", SetLanePredictions);
    auto alone = f.Train({1}, make, "alone", SetLanePredictions);
    const std::string name = make(1).name;
    RequireSameBits(f, packed[1], alone[1], "packed-" + name + ".pt", "alone-" + name + ".pt");
    CHECK(packed[1].metrics["engine"] == "lanes");
    auto module = LoadMember(f.dir.File("packed-" + name + ".pt"));
    REQUIRE(module.ok());
    CHECK(module->find_method("lane_linear").has_value());
    RequireModulePredicts(f, "packed-" + name + ".pt", f.holdout, 200, packed[1].holdout_pred);
    RequireModulePredicts(f, "packed-" + name + ".pt", f.pool, 100, packed[1].pool_pred);
  }
}

TEST_CASE("without lane_predictions the same trained member predicts through its GEMMs, as before", "[trainer][prediction][lanes]") {
  for (MemberSpec (*make)(int) : {&Seed000, &GaussianTanh}) {
    Fixture f;
    auto lanes = f.Train({0, 1}, make, "lanes", SetLanePredictions);
    auto gemms = f.Train({0, 1}, make, "gemms", SetGemmPredictions);
    for (int k : {0, 1}) {
      const std::string name = make(k).name;
      auto a = LoadMember(f.dir.File("lanes-" + name + ".pt")), b = LoadMember(f.dir.File("gemms-" + name + ".pt"));
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      RequireSameBuffers(*a, *b);  // the training is the same: the lanes train both
      CHECK_FALSE(b->find_method("lane_linear").has_value());
      RequireModulePredicts(f, "gemms-" + name + ".pt", f.holdout, 200, gemms[k].holdout_pred);
      // Two forwards of the same weights: close, but not the same bits on every row.
      const std::vector<float>& p = lanes[k].holdout_pred;
      const std::vector<float>& q = gemms[k].holdout_pred;
      REQUIRE(p.size() == q.size());
      CHECK(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)) != 0);
      for (size_t i = 0; i < p.size(); ++i) REQUIRE(std::fabs(p[i] - q[i]) <= 1e-3f * (1.0f + std::fabs(q[i])));
    }
  }
}

TEST_CASE("members the lanes do not train ignore lane_predictions", "[trainer][prediction][lanes]") {
  Fixture f;
  f.Classify();
  auto with = f.Train({0}, Classifier, "with", SetLanePredictions);
  auto without = f.Train({0}, Classifier, "without", SetGemmPredictions);
  REQUIRE(with[0].status.ok());
  CHECK(with[0].metrics["engine"] != "lanes");
  RequireSameBits(f, with[0], without[0], "with-m000.pt", "without-m000.pt");
  auto module = LoadMember(f.dir.File("with-m000.pt"));
  REQUIRE(module.ok());
  CHECK_FALSE(module->find_method("lane_linear").has_value());
}

}  // namespace
}  // namespace ens
