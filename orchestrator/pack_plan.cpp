#include "orchestrator/pack_plan.h"

#include <map>

#include <nlohmann/json.hpp>

namespace ens {

std::string PackKey(const MemberSpec& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) layers.push_back({l.units, l.activation, l.dropout});
  return nlohmann::json{layers, m.loss, m.huber_delta, m.optimizer, m.lr, m.weight_decay, m.momentum,
                        m.epochs, m.batch_size, m.l1, m.l2, m.validation_split}
      .dump();
}

std::vector<std::vector<int>> PlanPacks(const std::vector<MemberSpec>& members, int pack_size) {
  int cap = pack_size == 0 ? kAutoPackCap : std::max(1, pack_size);
  std::vector<std::vector<int>> packs;
  std::map<std::string, size_t> open;  // key -> index of its pack still filling
  for (size_t i = 0; i < members.size(); ++i) {
    std::string key = PackKey(members[i]);
    auto it = open.find(key);
    if (it == open.end() || static_cast<int>(packs[it->second].size()) >= cap) {
      packs.push_back({});
      open[key] = packs.size() - 1;
      it = open.find(key);
    }
    packs[it->second].push_back(static_cast<int>(i));
  }
  return packs;
}

}  // namespace ens
