#include "common/config/lane_fit.h"

#include "common/config/config.h"

namespace ens {

bool LaneFits(const MemberSpec& m, int classes, int targets, int features) {
  if (classes > 0 || targets != 1 || m.model.kind != ModelKind::kMlp || !TraitsOf(m.loss).lane) return false;
  if (static_cast<int64_t>(m.layers.size()) + 1 > kLaneMaxLayers) return false;
  int64_t in = features, weights = 0;
  for (const LayerSpec& l : m.layers) {
    weights += in * l.units;
    in = l.units;
  }
  return weights + in * TraitsOf(m.loss).outputs <= kLaneMaxWeights;
}

}  // namespace ens
