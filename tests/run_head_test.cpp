// Tests of common/run_head: the head each loss, class count and target count make, its output
// width, its committee scores and its score metric; a config's head follows its task.
#include "common/config/run_head.h"

#include <catch2/catch.hpp>

#include "common/config/config.h"

namespace ens {
namespace {

TEST_CASE("run head: the loss, classes and targets decide the kind and the output width", "[run_head]") {
  CHECK(RunHead::For(LossKind::kMse, 0, 1).kind() == RunHead::Kind::kRegression);
  CHECK(RunHead::For(LossKind::kMse, 0, 1).OutputWidth() == 1);
  CHECK(RunHead::For(LossKind::kHuber, 0, 3).OutputWidth() == 3);
  CHECK(RunHead::For(LossKind::kMae, 0, 0).OutputWidth() == 1);  // 0 targets count as 1
  CHECK(RunHead::For(LossKind::kGaussianNll, 0, 1).gaussian());
  CHECK(RunHead::For(LossKind::kGaussianNll, 0, 1).OutputWidth() == 2);  // mean, variance
  const RunHead k = RunHead::For(LossKind::kCrossEntropy, 4, 1);
  CHECK(k.classification());
  CHECK(k.classes() == 4);
  CHECK(k.targets() == 1);
  CHECK(k.OutputWidth() == 4);
  // Classes win over the loss: a classification run's width is its class count.
  CHECK(RunHead::For(LossKind::kGaussianNll, 3, 1).OutputWidth() == 3);
}

TEST_CASE("run head: each kind's default score, and a Gaussian head's std is its epistemic spread", "[run_head]") {
  CHECK(RunHead::Regression(2).DefaultScore() == CommitteeScore::kStd);
  CHECK(RunHead::Gaussian().DefaultScore() == CommitteeScore::kEpistemic);
  CHECK(RunHead::Classification(3).DefaultScore() == CommitteeScore::kBald);
  CHECK(RunHead::Gaussian().Effective(CommitteeScore::kStd) == CommitteeScore::kEpistemic);
  CHECK(RunHead::Regression().Effective(CommitteeScore::kStd) == CommitteeScore::kStd);
  CHECK(RunHead::Classification(2).Effective(CommitteeScore::kEntropy) == CommitteeScore::kEntropy);
  CHECK(std::string(RunHead::Classification(2).ScoreMetric()) == "holdout_accuracy");
  // Which scores apply: each head's default always; class scores only to classes, epistemic
  // only to a Gaussian head.
  for (RunHead h : {RunHead::Regression(), RunHead::Gaussian(), RunHead::Classification(3)}) {
    CHECK(h.ScoreProblem(h.DefaultScore()).empty());
    CHECK(h.ScoreProblem(CommitteeScore::kStd).empty());
    CHECK(h.ScoreProblem(CommitteeScore::kBald).empty() == h.classification());
    CHECK(h.ScoreProblem(CommitteeScore::kEntropy).empty() == h.classification());
    CHECK(h.ScoreProblem(CommitteeScore::kEpistemic).empty() == h.gaussian());
  }
  CHECK(RunHead::Regression().ScoreProblem(CommitteeScore::kBald) ==
        "\"bald\" scores class probabilities; it needs task \"classification\"");
  CHECK(std::string(RunHead::Gaussian().ScoreMetric()) == "holdout_rmse");
}

TEST_CASE("run head: a config's head is classification by its task, else by its members' loss", "[run_head]") {
  Config cfg;
  CHECK(RunHead::For(cfg, 0, 2).kind() == RunHead::Kind::kRegression);  // no members: plain regression
  CHECK(RunHead::For(cfg, 0, 2).targets() == 2);
  MemberSpec m;
  m.loss = LossKind::kGaussianNll;
  cfg.members.push_back(m);
  CHECK(RunHead::For(cfg, 0, 1).gaussian());
  cfg.task = TaskKind::kClassification;
  cfg.members[0].loss = LossKind::kCrossEntropy;
  CHECK(RunHead::For(cfg, 5, 1).OutputWidth() == 5);
  CHECK(RunHead::For(cfg, 0, 1).classification());  // before the data says how many classes
  CHECK(RunHead::For(cfg, 0, 1).OutputWidth() == 0);  // a width not known yet: any (script_model_check.h)
}

}  // namespace
}  // namespace ens
