#include "common/config/run_head.h"

#include "common/config/config.h"

namespace ens {

RunHead RunHead::For(LossKind loss, int classes, int targets) {
  if (classes > 0) return Classification(classes);
  if (loss == LossKind::kGaussianNll) return Gaussian();
  return Regression(targets);
}

std::string RunHead::ScoreProblem(CommitteeScore score) const {
  switch (score) {  // every score named: a new one states which heads it applies to here
    case CommitteeScore::kStd:
      return "";  // every head: the spread of the members' outputs
    case CommitteeScore::kEntropy:
    case CommitteeScore::kBald:
      if (classification()) return "";
      return "\"" + std::string(Name(score)) + "\" scores class probabilities; it needs task \"classification\"";
    case CommitteeScore::kEpistemic:
      if (gaussian()) return "";
      return "\"epistemic\" scores Gaussian heads; it needs members with loss \"gaussian_nll\"";
  }
  return "unknown score";  // not reached: the switch names every score
}

RunHead RunHead::For(const Config& cfg, int classes, int targets) {
  if (cfg.task == TaskKind::kClassification) return Classification(classes);
  return For(cfg.members.empty() ? LossKind::kMse : cfg.members[0].loss, 0, targets);
}

}  // namespace ens
