// early_stopping.refit: the training length chosen on the validation rows, then every row
// trained for it from the member's first weights (worker/train/trainer.cpp, config.h).
#include <set>

#include "support/trainer_fixture.h"

namespace ens {
namespace {

using namespace ens::testing;

// A Gaussian head that searches up to 60 epochs; patience, lr and dropout differ by index, so
// members stop at other epochs.
MemberSpec Searching(int index) {
  MemberSpec m;
  m.name = "g" + std::to_string(1000 + index).substr(1);
  m.layers = {{12, Activation::kRelu, index % 3 == 2 ? 0.1 : 0.0}};
  m.loss = LossKind::kGaussianNll;
  m.lr = 5e-3 * (1 + index % 3);
  m.epochs = 60;
  m.batch_size = 50;
  m.validation_split = 0.2;
  m.early_stopping.enabled = true;
  m.early_stopping.patience = 2 + index % 3;
  m.early_stopping.refit = true;
  return m;
}

TEST_CASE("a refit member trains on every row for the epoch count its search chose, and says why",
          "[trainer][refit]") {
  Fixture f;  // 800 training rows
  auto out = f.Train({0}, Searching, "refit");
  const TrainOutputs& o = out[0];
  REQUIRE(o.status.ok());
  INFO(o.metrics.dump());
  const int chosen = o.metrics["epochs_chosen"].get<int>();
  const int searched = o.metrics["search_epochs"].get<int>();
  CHECK(chosen >= 1);
  CHECK(chosen < searched);  // patience 2 ran out before the 60-epoch budget on this table
  CHECK(searched <= 60);
  CHECK(o.metrics["epochs_run"] == chosen);
  CHECK(o.metrics["search_val_rows"] == 160);
  CHECK(o.metrics["refit_rows"] == 800);
  CHECK(std::isfinite(o.metrics["search_best_val_loss"].get<double>()));
  const std::string rule = o.metrics["length_rule"].get<std::string>();
  CHECK(rule == "least val_loss at epoch " + std::to_string(chosen) + " of " + std::to_string(searched) +
                    " searched (no better value for 2 epochs), then all 800 rows for " + std::to_string(chosen) +
                    " epochs");
  // The weights kept are the refit's: its history, one entry an epoch, no validation.
  REQUIRE(static_cast<int>(o.history.size()) == chosen);
  CHECK_FALSE(o.history.back().contains("val_loss"));
  CHECK(o.metrics.contains("holdout_rmse"));
}

TEST_CASE("a refit is the same bits as the member trained on every row for that many epochs",
          "[trainer][refit]") {
  Fixture f;
  auto refit = f.Train({1}, Searching, "refit");
  REQUIRE(refit[1].status.ok());
  static int chosen = 0;
  chosen = refit[1].metrics["epochs_chosen"].get<int>();
  auto plain = f.Train({1}, [](int i) {
    MemberSpec m = Searching(i);
    m.validation_split = 0;
    m.early_stopping = {};
    m.epochs = chosen;
    return m;
  }, "plain");
  RequireSameBits(f, refit[1], plain[1], "refit-g001.pt", "plain-g001.pt");
}

TEST_CASE("refit members choose the same length and bits alone and in a pack of 4", "[trainer][refit][pack]") {
  Fixture f;
  auto packed = f.Train({0, 1, 2, 3}, Searching, "p4");
  std::set<int> lengths;
  for (int i : {0, 1, 2, 3}) {
    auto alone = f.Train({i}, Searching, "a");
    INFO("member " << i << ": " << packed[i].metrics.dump());
    const std::string name = Searching(i).name + ".pt";
    RequireSameBits(f, alone[i], packed[i], "a-" + name, "p4-" + name);
    CHECK(alone[i].metrics["epochs_chosen"] == packed[i].metrics["epochs_chosen"]);
    CHECK(alone[i].metrics["length_rule"] == packed[i].metrics["length_rule"]);
    CHECK(packed[i].metrics["pack_position"] == i);
    lengths.insert(packed[i].metrics["epochs_chosen"].get<int>());
  }
  CHECK(lengths.size() > 1);  // the members chose their own lengths: the pack is not in step
}

}  // namespace
}  // namespace ens
