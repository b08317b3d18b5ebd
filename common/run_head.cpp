#include "common/run_head.h"

#include "common/config.h"

namespace ens {

RunHead RunHead::For(LossKind loss, int classes, int targets) {
  if (classes > 0) return Classification(classes);
  if (loss == LossKind::kGaussianNll) return Gaussian();
  return Regression(targets);
}

RunHead RunHead::For(const Config& cfg, int classes, int targets) {
  if (cfg.task == TaskKind::kClassification) return Classification(classes);
  return For(cfg.members.empty() ? LossKind::kMse : cfg.members[0].loss, 0, targets);
}

}  // namespace ens
