#include "orchestrator/run/pack_plan.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "common/config/lane_fit.h"
#include "common/data/member_rows.h"

namespace ens {
namespace {

// Cuts `group` into `parts` contiguous runs whose sizes differ by at most one.
void Cut(const std::vector<int>& group, size_t parts, std::vector<std::vector<int>>* out) {
  size_t begin = 0;
  for (size_t p = 0; p < parts; ++p) {
    size_t len = group.size() / parts + (p < group.size() % parts ? 1 : 0);
    out->emplace_back(group.begin() + begin, group.begin() + begin + len);
    begin += len;
  }
}

}  // namespace

uint64_t MemberPackBytes(const MemberSpec& m, const PackShape& shape) {
  uint64_t params = 0, units = 0, in = static_cast<uint64_t>(std::max(1, shape.features));
  for (const auto& l : m.layers) {
    params += (in + 1) * static_cast<uint64_t>(l.units);
    units += static_cast<uint64_t>(l.units);
    in = static_cast<uint64_t>(l.units);
  }
  params += in + 1;  // the output layer
  units += 1;
  // Row lists (member_rows.h): 4 B of split and 4 B of epoch order per row while listed;
  // nothing per row on a keyed table.
  const uint64_t row_bytes = shape.train_rows <= MemberRows::kListedRowsMax ? 8 * shape.train_rows : 0;
  return 20 * params + 16 * units * static_cast<uint64_t>(std::max(1, m.batch_size)) + row_bytes;
}

std::string PackKey(const MemberSpec& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) layers.push_back({l.units, Name(l.activation)});
  nlohmann::json key{Name(m.model.kind), layers,       Name(m.loss), Name(m.optimizer),
                     m.batch_size,       Name(m.initializer), m.validation_split};
  if (m.adversarial_eps > 0) key.push_back("adversarial");  // two forward passes a step: never packed with one
  if (m.early_stopping.refit) key.push_back("refit");       // its second part trains on every row: other split sizes
  return key.dump();
}

std::vector<std::vector<int>> PlanPacks(const std::vector<MemberSpec>& members, int pack_size, int workers,
                                        const PackShape& shape) {
  std::vector<std::vector<int>> groups;  // compatible members, in order of their first member
  std::map<std::string, size_t> group_of;
  std::vector<std::vector<int>> packs;
  for (size_t i = 0; i < members.size(); ++i) {
    const bool alone_on_gpu = shape.gpu && !LaneFits(members[i], shape.classes, shape.targets, shape.features);
    if (!TraitsOf(members[i].model.kind).packable || alone_on_gpu) {  // trains alone
      packs.push_back({static_cast<int>(i)});
      continue;
    }
    auto [it, fresh] = group_of.emplace(PackKey(members[i]), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(static_cast<int>(i));
  }
  for (const auto& g : groups) {
    const size_t n = g.size();
    if (pack_size == 0) {
      const uint64_t fit = std::max<uint64_t>(1, kAutoPackBytes / MemberPackBytes(members[g[0]], shape));
      const size_t cap = static_cast<size_t>(std::min<uint64_t>(kAutoPackMaxMembers, fit));
      size_t by_cap = (n + cap - 1) / cap;
      Cut(g, std::max(by_cap, std::min(n, static_cast<size_t>(std::max(1, workers)))), &packs);
      continue;
    }
    const size_t cap = static_cast<size_t>(std::max(1, pack_size));
    for (size_t b = 0; b < n; b += cap) packs.emplace_back(g.begin() + b, g.begin() + std::min(n, b + cap));
  }
  std::sort(packs.begin(), packs.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return packs;
}

}  // namespace ens
