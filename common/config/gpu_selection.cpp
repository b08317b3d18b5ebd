#include "common/config/gpu_selection.h"

#include <algorithm>
#include <cctype>

namespace ens {

namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

nlohmann::json GpuSelection::ToJson() const {
  switch (kind) {
    case Kind::kAuto: return "auto";
    case Kind::kNone: return "none";
    case Kind::kCount: return count;
    case Kind::kList: return list;
  }
  return "auto";  // not reached: the switch names every kind
}

bool GpuEntryNames(const std::string& entry, const GpuCandidate& c) {
  if (AllDigits(entry)) return c.index >= 0 && std::to_string(c.index) == entry;
  return !entry.empty() && c.id.rfind(entry, 0) == 0;
}

StatusOr<std::vector<std::string>> ResolveGpuSelection(const GpuSelection& sel, const std::vector<GpuCandidate>& usable,
                                                       const std::string& pointer, const std::string& what) {
  std::vector<std::string> ids;
  switch (sel.kind) {
    case GpuSelection::Kind::kNone:
      return ids;
    case GpuSelection::Kind::kAuto:
      for (const GpuCandidate& c : usable) ids.push_back(c.id);
      return ids;
    case GpuSelection::Kind::kCount:
      if (sel.count > static_cast<int>(usable.size()))
        return Status::InvalidArgument(pointer + ": asks " + std::to_string(sel.count) + " GPU" +
                                       (sel.count == 1 ? "" : "s") + ", more than " + what);
      for (int i = 0; i < sel.count; ++i) ids.push_back(usable[static_cast<size_t>(i)].id);
      return ids;
    case GpuSelection::Kind::kList:
      for (size_t i = 0; i < sel.list.size(); ++i) {
        const std::string& entry = sel.list[i];
        std::vector<std::string> hits;
        for (const GpuCandidate& c : usable)
          if (GpuEntryNames(entry, c)) hits.push_back(c.id);
        // An index names its GPU's every device (the GPU, or each of its MIG instances); an id
        // or a prefix names one device, never several.
        const bool index = AllDigits(entry);
        if (hits.empty() || (!index && hits.size() > 1))
          return Status::InvalidArgument(pointer + "/" + std::to_string(i) + ": '" + entry + "' is " +
                                         (hits.empty() ? "none" : "more than one") + " of " + what);
        for (const std::string& id : hits) {
          if (std::find(ids.begin(), ids.end(), id) != ids.end())
            return Status::InvalidArgument(pointer + "/" + std::to_string(i) + ": '" + entry + "' names GPU " + id +
                                           " again");
          ids.push_back(id);
        }
      }
      return ids;
  }
  return ids;  // not reached
}

}  // namespace ens
