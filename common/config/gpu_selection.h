// GpuSelection: which GPUs a run config (resources.gpus) or the serve daemon's config asks
// for, parsed once by the config reader (ReadGpus, config_validator.h) and resolved against
// the devices a process may use by one function (ResolveGpuSelection, below) that `ensembled
// run` (PlanWorkers), `ensembled serve` (its own GPUs) and the serve daemon's GrantPool (a
// run's ask) all call; a GPU list entry names a device by one rule (GpuEntryNames).
//
//   "auto"  every device the process may use (none: CPU workers)
//   "none"  no GPU
//   N       a count: the first N of them (under `ensembled serve`: any N free ones)
//   [...]   a list of physical indices (nvidia-smi's) or UUIDs / unique UUID prefixes
//
// Plain data and pure functions. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

struct GpuSelection {
  enum class Kind { kAuto, kNone, kCount, kList };
  Kind kind = Kind::kAuto;
  int count = 0;                  // kCount: >= 1
  std::vector<std::string> list;  // kList: indices or UUIDs (prefixes), as written

  static GpuSelection Auto() { return {}; }
  static GpuSelection None() { return {Kind::kNone, 0, {}}; }
  static GpuSelection Count(int n) { return {Kind::kCount, n, {}}; }
  static GpuSelection List(std::vector<std::string> ids) { return {Kind::kList, 0, std::move(ids)}; }

  bool none() const { return kind == Kind::kNone; }
  // The config's form: "auto", "none", N or [ids].
  nlohmann::json ToJson() const;
  bool operator==(const GpuSelection& o) const { return kind == o.kind && count == o.count && list == o.list; }
};

// One device a selection may pick.
struct GpuCandidate {
  std::string id;  // what CUDA_VISIBLE_DEVICES gets: a UUID (GPU- or MIG-), else the index
  int index = -1;  // its physical GPU's index (nvidia-smi's); -1 when unknown
};

// Whether list entry `entry` names `c`: an entry of digits is a physical index (it names the
// GPU and each of its MIG instances); anything else is the device's id or the start of it.
bool GpuEntryNames(const std::string& entry, const GpuCandidate& c);

// The ids `sel` picks from `usable` (in their order; a list in its own order). "none", or
// "auto" with nothing usable: empty. InvalidArgument, naming `pointer` (or `pointer`/<i> for a
// list entry), when a count is larger than what is usable, a list entry names no device, an id
// or prefix names more than one, or a device is named twice; `what` says what the usable
// devices are ("this daemon's 4 GPUs": "asks 5 GPUs, more than this daemon's 4 GPUs", "'7' is
// none of this daemon's 4 GPUs").
StatusOr<std::vector<std::string>> ResolveGpuSelection(const GpuSelection& sel, const std::vector<GpuCandidate>& usable,
                                                       const std::string& pointer, const std::string& what);

}  // namespace ens
