#include "common/run_head.h"

#include "common/config.h"

namespace ens {

RunHead RunHead::For(LossKind loss, int classes, int targets) {
  if (classes > 0) return Classification(classes);
  if (loss == LossKind::kGaussianNll) return Gaussian();
  return Regression(targets);
}

std::string RunHead::ScoreProblem(CommitteeScore score) const {
  if (!classification() && (score == CommitteeScore::kEntropy || score == CommitteeScore::kBald))
    return "\"" + std::string(Name(score)) + "\" scores class probabilities; it needs task \"classification\"";
  if (!gaussian() && score == CommitteeScore::kEpistemic)
    return "\"epistemic\" scores Gaussian heads; it needs members with loss \"gaussian_nll\"";
  return "";
}

RunHead RunHead::For(const Config& cfg, int classes, int targets) {
  if (cfg.task == TaskKind::kClassification) return Classification(classes);
  return For(cfg.members.empty() ? LossKind::kMse : cfg.members[0].loss, 0, targets);
}

}  // namespace ens
