// TorchScript members in-process (worker/models/script_model.h): the user's module trained by the one
// loop learns, retrains to the same bits (dropout inside the module included), draws its
// kernels from the member's seed or keeps the file's, checkpoints as a callable module,
// continues from its previous round when warm-started, predicts several targets, and a
// missing file, a file that is not a module or a module of the wrong width is an error naming
// the path.
#include "support/trainer_fixture.h"

#include <fstream>

#include "worker/models/script_model.h"

namespace ens {
namespace {

using namespace ens::testing;

// A module as a user would script it: features -> 16 tanh (dropout 0.1) -> a submodule "head"
// with `outputs` units; parameters in a submodule test the dotted names.
void SaveNet(const std::string& path, int outputs, int features = kFeatures) {
  torch::jit::Module head(c10::QualifiedName("__torch__.Head"));
  head.register_attribute("training", c10::BoolType::get(), true);  // as torch.jit.script gives it
  head.register_parameter("weight", torch::randn({outputs, 16}), false);
  head.register_parameter("bias", torch::randn({outputs}), false);
  head.define("def forward(self, h):\n    return torch.addmm(self.bias, h, self.weight.t())\n");
  torch::jit::Module net(c10::QualifiedName("__torch__.Net"));
  net.register_attribute("training", c10::BoolType::get(), true);
  net.register_parameter("w1", torch::randn({16, features}), false);
  net.register_parameter("b1", torch::randn({16}), false);
  net.register_module("head", head);
  net.define("def forward(self, x):\n"
             "    h = torch.tanh(torch.addmm(self.b1, x, self.w1.t()))\n"
             "    h = torch.dropout(h, 0.1, self.training)\n"
             "    return self.head.forward(h)\n");
  net.save(path);
}

MemberSpec ScriptMember(const std::string& path, int index) {
  MemberSpec m;
  m.name = "s" + std::to_string(1000 + index).substr(1);
  m.model.kind = ModelKind::kTorchscript;
  m.model.path = path;
  m.lr = 5e-3;
  m.epochs = 40;
  m.l2 = 1e-5;
  m.early_stopping.enabled = true;  // a small table: keep the best epoch, not the overfit last
  m.early_stopping.patience = 5;
  return m;
}

// One member trained alone (a pack of one); its outputs, whatever its status.
TrainOutputs TrainAlone(const TrainInputs& in) {
  std::vector<TrainOutputs> out;
  TrainPack({in}, &out);
  REQUIRE(out.size() == 1);
  return out[0];
}

// TrainAlone, for a member that must train.
TrainOutputs MustTrain(const TrainInputs& in) {
  TrainOutputs o = TrainAlone(in);
  INFO(o.status.ToString());
  REQUIRE(o.status.ok());
  return o;
}

double HoldoutStd(const Fixture& f) {
  double mean = 0, sq = 0;
  for (int r = 0; r < 200; ++r) mean += f.holdout[r * (kFeatures + 1) + kFeatures] / 200.0;
  for (int r = 0; r < 200; ++r) {
    const double d = f.holdout[r * (kFeatures + 1) + kFeatures] - mean;
    sq += d * d / 200.0;
  }
  return std::sqrt(sq);
}

TEST_CASE("a TorchScript member learns, checkpoints its module and retrains to the same bits", "[trainer][script]") {
  Fixture f;
  const std::string model = f.dir.File("net.pt");
  SaveNet(model, 1);
  auto train = [&](const std::string& tag) { return MustTrain(f.Inputs(f.Task(ScriptMember(model, 0), 0), tag)); };
  TrainOutputs a = train("a"), b = train("b");
  // The table's target spreads HoldoutStd(); a constant predicts no better than that.
  INFO(a.metrics.dump());
  CHECK(a.metrics["holdout_rmse"].get<double>() < 0.9 * HoldoutStd(f));
  RequireSameBits(f, a, b, "a-s000.pt", "b-s000.pt");

  auto member = LoadMember(f.dir.File("a-s000.pt"));
  REQUIRE(member.ok());
  std::vector<std::string> names;
  for (const auto& [name, t] : MemberBuffers(*member)) names.push_back(name);
  CHECK(std::find(names.begin(), names.end(), "net.w1") != names.end());
  CHECK(std::find(names.begin(), names.end(), "net.head.weight") != names.end());
  // The checkpoint is callable on raw rows and gives the holdout predictions the worker made.
  torch::Tensor x = torch::from_blob(f.holdout.data(), {200, kFeatures + 1}).narrow(1, 0, kFeatures);
  std::vector<float> again = PredictRows(*member, x);
  REQUIRE(again.size() == a.holdout_pred.size());
  CHECK(std::memcmp(again.data(), a.holdout_pred.data(), again.size() * 4) == 0);
}

TEST_CASE("init member draws a TorchScript member's kernels from its seed, init file keeps the file's weights",
          "[trainer][script]") {
  ScratchDir dir;
  const std::string path = dir.File("net.pt");
  SaveNet(path, 1);
  auto file = LoadUserModule(path, kFeatures, 1);
  REQUIRE(file.ok());
  const torch::Tensor w1 = file->attr("w1").toTensor().clone(), b1 = file->attr("b1").toTensor().clone();

  MemberSpec spec = ScriptMember(path, 0);
  auto params = [&](uint64_t seed, ScriptInit init) {
    spec.model.init = init;
    auto module = LoadUserModule(path, kFeatures, 1);
    REQUIRE(module.ok());
    auto model = BuildScriptModel({&spec, seed, seed + 1}, std::move(*module), 1, torch::kCPU);
    return model->Parameters();
  };
  auto a = params(1, ScriptInit::kMember), a2 = params(1, ScriptInit::kMember), b = params(2, ScriptInit::kMember);
  REQUIRE(a.size() == 4);  // w1, b1, head.weight, head.bias
  CHECK(torch::equal(a[0], a2[0]));
  CHECK_FALSE(torch::equal(a[0], b[0]));
  CHECK(a[0].reshape(w1.sizes()).abs().max().item<float>() <= std::sqrt(6.0f / (kFeatures + 16)) + 1e-6f);
  CHECK(a[1].abs().max().item<float>() == 0.0f);  // 1-d parameters start at zero
  CHECK_FALSE(torch::equal(a[0].reshape(w1.sizes()), w1));

  auto kept = params(1, ScriptInit::kFile);
  CHECK(torch::equal(kept[0].reshape(w1.sizes()), w1));
  CHECK(torch::equal(kept[1].reshape(b1.sizes()), b1));
}

TEST_CASE("a TorchScript module that is missing, not a module, or of the wrong width is refused naming its path",
          "[trainer][script]") {
  Fixture f;
  auto missing = LoadUserModule(f.dir.File("nope.pt"), kFeatures, 1);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message().find(f.dir.File("nope.pt")) != std::string::npos);

  const std::string junk = f.dir.File("junk.pt");
  { std::ofstream(junk) << "this is not a TorchScript archive\n"; }
  auto not_module = LoadUserModule(junk, kFeatures, 1);
  REQUIRE_FALSE(not_module.ok());
  CHECK(not_module.status().message().find(junk + ": not a TorchScript module") != std::string::npos);

  const std::string wide = f.dir.File("wide.pt");
  SaveNet(wide, 3);
  auto wrong = LoadUserModule(wide, kFeatures, 1);
  REQUIRE_FALSE(wrong.ok());
  INFO(wrong.status().message());
  CHECK(wrong.status().message().find("returned [2, 3]; this run needs [2, 1]") != std::string::npos);
  auto narrow_features = LoadUserModule(wide, kFeatures + 2, 3);
  REQUIRE_FALSE(narrow_features.ok());
  CHECK(narrow_features.status().message().find("failed") != std::string::npos);

  // The trainer refuses the member, permanently, with the same words.
  TrainOutputs refused = TrainAlone(f.Inputs(f.Task(ScriptMember(wide, 0), 0), "w"));
  CHECK_FALSE(refused.status.ok());
  CHECK(refused.permanent_failure);
  CHECK(refused.status.message().find("member s000: " + wide) != std::string::npos);
}

TEST_CASE("a warm-started TorchScript member continues from its previous round", "[trainer][script][warm]") {
  Fixture f;
  const std::string model = f.dir.File("net.pt");
  SaveNet(model, 1);
  auto train = [&](int round, bool warm, const std::string& from, const std::string& tag) {
    MemberSpec spec = ScriptMember(model, 0);
    spec.warm_start = warm;
    spec.warm_start_epochs = 4;
    TaskSpec& t = f.Task(spec, 0);
    t.round = round;
    t.seed = MemberSeed(7, 0, static_cast<uint64_t>(round));
    t.warm_from = from;
    return MustTrain(f.Inputs(t, tag));
  };
  TrainOutputs r0 = train(0, true, "", "r0");
  REQUIRE_FALSE(r0.train_state.empty());
  const std::string state = f.dir.File("state.pt");
  { std::ofstream(state, std::ios::binary) << r0.train_state; }
  TrainOutputs warm = train(1, true, state, "warm"), cold = train(1, false, "", "cold");
  CHECK(warm.metrics["warm_start"] == "warm");
  CHECK(warm.metrics["epochs_run"] == 4);
  const double warm1 = warm.history.front()["loss"], cold1 = cold.history.front()["loss"];
  INFO("first epoch of round 1: warm " << warm1 << ", cold " << cold1);
  CHECK(warm1 < 0.8 * cold1);
}

TEST_CASE("a TorchScript classifier beats chance on three classes", "[trainer][script]") {
  Fixture f;
  f.Classify();
  const std::string model = f.dir.File("net3.pt");
  SaveNet(model, 3);
  MemberSpec spec = ScriptMember(model, 0);
  spec.loss = LossKind::kCrossEntropy;
  TrainOutputs o = MustTrain(f.Inputs(f.Task(spec, 0), "c"));
  INFO(o.metrics.dump());
  CHECK(o.metrics["holdout_accuracy"].get<double>() > 0.7);  // chance: about 1/3
  REQUIRE(o.holdout_pred.size() == 200 * 3);
  CHECK(o.holdout_pred[0] + o.holdout_pred[1] + o.holdout_pred[2] == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("a TorchScript member of two outputs predicts two targets, one output is refused for them",
          "[trainer][script][targets]") {
  Fixture f;
  f.AddTarget();
  const std::string model = f.dir.File("net2.pt");
  SaveNet(model, 2);
  TrainOutputs o = MustTrain(f.Inputs(f.Task(ScriptMember(model, 0), 0), "t"));
  INFO(o.metrics.dump());
  REQUIRE(o.holdout_pred.size() == 200 * 2);
  REQUIRE(o.metrics["holdout_rmse_per_target"].size() == 2);
  // The second target (100 (x0 + 0.5 x1) + 300, std ~110) is linear: far below a constant's RMSE.
  CHECK(o.metrics["holdout_rmse_per_target"][1].get<double>() < 25.0);

  const std::string narrow = f.dir.File("net1.pt");
  SaveNet(narrow, 1);
  TrainOutputs refused = TrainAlone(f.Inputs(f.Task(ScriptMember(narrow, 1), 1), "t"));
  REQUIRE_FALSE(refused.status.ok());
  CHECK(refused.permanent_failure);
  CHECK_THAT(refused.status.message(), Catch::Contains("returned [2, 1]; this run needs [2, 2]"));
}

}  // namespace
}  // namespace ens
