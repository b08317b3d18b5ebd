#include "common/config/lane_fit.h"

#include "common/config/config.h"

namespace ens {

bool LaneFits(const MemberSpec& m, int classes, int targets, int features) {
  if (classes > 0 || targets != 1 || m.model.kind != ModelKind::kMlp) return false;
  switch (m.loss) {
    case LossKind::kHuber:
    case LossKind::kMse:
    case LossKind::kMae:
    case LossKind::kGaussianNll: break;
    case LossKind::kCrossEntropy: return false;
  }
  if (static_cast<int64_t>(m.layers.size()) + 1 > kLaneMaxLayers) return false;
  int64_t in = features, weights = 0;
  for (const LayerSpec& l : m.layers) {
    weights += in * l.units;
    in = l.units;
  }
  return weights + in * (m.loss == LossKind::kGaussianNll ? 2 : 1) <= kLaneMaxWeights;
}

}  // namespace ens
