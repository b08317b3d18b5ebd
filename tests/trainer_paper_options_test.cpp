// The deep-ensembles paper's member options in the trainer (issue 49): torch_default
// initialisation (weights and biases uniform in +-1/sqrt(fan_in), drawn per member as alone),
// validation_split 0 (every row trains; no validation figures), and adversarial training by the
// fast gradient sign (it changes what a member learns, and a member's bits are the same packed
// and alone).
#include "support/trainer_fixture.h"

#include <cmath>

#include "worker/models/model.h"

namespace ens {
namespace {

using namespace ens::testing;

MemberSpec Paper(int index) {
  MemberSpec m;
  m.name = "p" + std::to_string(1000 + index).substr(1);
  m.layers = {{50, Activation::kRelu, 0.0}};
  m.loss = LossKind::kGaussianNll;
  m.initializer = Initializer::kTorchDefault;
  m.batch_size = 100;
  m.epochs = 3;
  m.lr = 0.01;
  return m;
}

TEST_CASE("torch_default draws weights and biases in +-1/sqrt(fan_in), each member as it would alone", "[paper]") {
  std::vector<MemberSpec> specs = {Paper(0), Paper(1), Paper(2)};
  std::vector<ModelMember> all;
  for (size_t k = 0; k < specs.size(); ++k) all.push_back({&specs[k], 100 + k, 200 + k});
  const std::vector<torch::Tensor> pack = BuildMlp(all, 9, 2, torch::kCPU)->Parameters();
  REQUIRE(pack.size() == 4);
  const double bound0 = 1 / std::sqrt(9.0), bound1 = 1 / std::sqrt(50.0);
  CHECK(pack[0].abs().max().item<float>() <= bound0);
  CHECK(pack[1].abs().max().item<float>() <= bound0);
  CHECK(pack[1].abs().max().item<float>() > bound0 / 2);  // biases are drawn, not zero
  CHECK(pack[2].abs().max().item<float>() <= bound1);
  CHECK(pack[3].abs().max().item<float>() <= bound1);
  for (size_t k = 0; k < specs.size(); ++k) {
    const std::vector<torch::Tensor> alone = BuildMlp({all[k]}, 9, 2, torch::kCPU)->Parameters();
    for (size_t i = 0; i < alone.size(); ++i) CHECK(torch::equal(alone[i][0], pack[i][static_cast<int64_t>(k)]));
  }
}

TEST_CASE("validation_split 0 trains on every row and reports no validation figures", "[paper]") {
  Fixture f;
  auto out = f.Train({0}, [](int i) {
    MemberSpec m = Paper(i);
    m.validation_split = 0;
    return m;
  }, "noval");
  const TrainOutputs& o = out[0];
  INFO(o.status.ToString());
  REQUIRE(o.status.ok());
  REQUIRE(o.history.size() == 3);
  for (const auto& h : o.history) {
    CHECK(h.contains("loss"));
    CHECK_FALSE(h.contains("val_loss"));
    CHECK(std::isfinite(h["loss"].get<double>()));
  }
  CHECK_FALSE(o.metrics.contains("best_val_loss"));
  CHECK(o.metrics["epochs_run"] == 3);
  CHECK(o.metrics["stop_step"] == 3 * 8);  // 800 rows, every one trains: 8 batches of 100 an epoch
}

TEST_CASE("adversarial training changes what a member learns and keeps its bits packed and alone", "[paper][pack]") {
  auto adversarial = [](int i) {
    MemberSpec m = Paper(i);
    m.adversarial_eps = 0.01 * (1 + i % 2);
    m.layers[0].dropout = i == 1 ? 0.1 : 0.0;
    return m;
  };
  Fixture f;
  auto packed = f.Train({0, 1, 2}, adversarial, "packed");
  for (int i : {0, 1, 2}) {
    auto alone = f.Train({i}, adversarial, "alone");
    const std::string name = adversarial(i).name;
    RequireSameBits(f, packed[i], alone[i], "packed-" + name + ".pt", "alone-" + name + ".pt");
  }
  auto plain = f.Train({0}, [](int i) { return Paper(i); }, "plain");
  REQUIRE(plain[0].status.ok());
  CHECK(plain[0].holdout_pred != packed[0].holdout_pred);
  for (const auto& h : packed[0].history) CHECK(std::isfinite(h["loss"].get<double>()));
}

}  // namespace
}  // namespace ens
