#include "orchestrator/gpu/gpu_discovery.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/base/env_vars.h"
#include "orchestrator/gpu/nvml.h"

namespace ens {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// PCI bus ids compare as text once their case and domain width agree ("0000:3b:00.0" from
// /proc, "00000000:3B:00.0" from NVML).
std::string BusKey(const std::string& bus) {
  std::string b = Lower(bus);
  size_t colon = b.find(':');
  if (colon != std::string::npos && colon < 8) b = std::string(8 - colon, '0') + b;
  return b;
}

// /proc/driver/nvidia/gpus/<bus>/information: "Model: \t NVIDIA H200", "GPU UUID: \t GPU-...".
DiscoveredGpu FromProc(const std::filesystem::path& dir) {
  DiscoveredGpu g;
  g.pci_bus_id = dir.filename().string();
  std::ifstream in(dir / "information");
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Trim(line.substr(0, colon)), value = Trim(line.substr(colon + 1));
    if (key == "Model") g.name = value;
    else if (key == "GPU UUID") g.uuid = value;
    else if (key == "Bus Location") g.pci_bus_id = value;
  }
  return g;
}

std::string Label(const DiscoveredGpu& g) {
  std::string l = "GPU " + std::to_string(g.index);
  std::string detail = g.uuid;
  if (!g.name.empty()) detail += (detail.empty() ? "" : ", ") + g.name;
  return detail.empty() ? l : l + " (" + detail + ")";
}

void AddDevicesOf(const DiscoveredGpu& g, std::vector<UsableGpu>* out) {
  if (!g.mig_uuids.empty()) {
    for (const auto& m : g.mig_uuids) out->push_back({m, g.index, Label(g) + " MIG " + m});
    return;
  }
  out->push_back({g.uuid.empty() ? std::to_string(g.index) : g.uuid, g.index, Label(g)});
}

// The inventory's GPUs a token names: an index, a GPU UUID or unique prefix of one, a MIG UUID.
// Empty when none; more than one only for an ambiguous prefix.
std::vector<UsableGpu> Match(const GpuInventory& inv, const std::string& token) {
  std::vector<UsableGpu> out;
  if (AllDigits(token)) {
    size_t i = std::stoul(token);
    if (i < inv.gpus.size()) AddDevicesOf(inv.gpus[i], &out);
    return out;
  }
  for (const auto& g : inv.gpus) {
    for (const auto& m : g.mig_uuids)
      if (m == token) return {{m, g.index, Label(g) + " MIG " + m}};
    if (!g.uuid.empty() && g.uuid.rfind(token, 0) == 0)
      out.push_back({g.uuid, g.index, Label(g)});  // the whole GPU, even in MIG mode: as named
  }
  return out;
}

bool KnowsUuids(const GpuInventory& inv) {
  return std::any_of(inv.gpus.begin(), inv.gpus.end(), [](const DiscoveredGpu& g) { return !g.uuid.empty(); });
}

}  // namespace

GpuInventory DiscoverGpus(const Nvml* nvml, const std::string& proc_root) {
  GpuInventory inv;
  if (const char* forced = EnvVarValue(EnvVar::kGpuCount)) {
    inv.source = Name(EnvVar::kGpuCount);
    for (int i = 0; i < std::atoi(forced); ++i) inv.gpus.push_back({i, "", "", "", 0, {}});
    return inv;
  }
  if (nvml != nullptr) {
    inv.source = "nvml";
    for (const NvmlDevice& d : nvml->Devices())
      inv.gpus.push_back({0, d.uuid, d.name, d.pci_bus_id, d.memory_total_bytes, d.mig_uuids});
  } else {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(proc_root + "/driver/nvidia/gpus", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      inv.gpus.push_back(FromProc(it->path()));
    inv.source = inv.gpus.empty() ? "none" : "/proc/driver/nvidia/gpus";
  }
  std::stable_sort(inv.gpus.begin(), inv.gpus.end(), [](const DiscoveredGpu& a, const DiscoveredGpu& b) {
    return BusKey(a.pci_bus_id) < BusKey(b.pci_bus_id);
  });
  for (size_t i = 0; i < inv.gpus.size(); ++i) inv.gpus[i].index = static_cast<int>(i);
  return inv;
}

StatusOr<UsableGpus> ResolveUsable(const GpuInventory& inv, const std::optional<std::string>& cuda_visible_devices) {
  UsableGpus u;
  u.inherited = cuda_visible_devices;
  if (!cuda_visible_devices) {
    for (const auto& g : inv.gpus) AddDevicesOf(g, &u.devices);
    return u;
  }
  std::set<std::string> seen;
  size_t start = 0;
  const std::string& v = *cuda_visible_devices;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    std::string token = Trim(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? v.size() + 1 : comma + 1;
    if (token.empty()) continue;
    std::vector<UsableGpu> m = Match(inv, token);
    if (m.empty() && !AllDigits(token) && !KnowsUuids(inv)) {
      m.push_back({token, -1, token});  // no UUIDs known here: taken as given; the worker checks it
    }
    if (m.empty())
      return Status::InvalidArgument("CUDA_VISIBLE_DEVICES=" + v + " names '" + token + "', which is none of the " +
                                     std::to_string(inv.gpus.size()) + " GPU(s) found (" + inv.source + ")");
    if (m.size() > 1 && !AllDigits(token))
      return Status::InvalidArgument("CUDA_VISIBLE_DEVICES=" + v + ": '" + token + "' is the start of more than one GPU UUID");
    for (auto& d : m)
      if (seen.insert(d.id).second) u.devices.push_back(std::move(d));
  }
  return u;
}

uint64_t DeviceMemoryBytes(const GpuInventory& inv, const UsableGpu& d) {
  if (d.gpu_index < 0 || d.gpu_index >= static_cast<int>(inv.gpus.size()) || d.id.rfind("MIG-", 0) == 0) return 0;
  return inv.gpus[static_cast<size_t>(d.gpu_index)].memory_total_bytes;
}

namespace {

std::string Gb(double gb) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3g", gb);
  return b;
}

// Sets each GPU worker's memory_fraction: the run's share of each GPU over its workers there.
Status SetMemoryFractions(const ResourcesSpec& r, const UsableGpus& usable, const GpuInventory& inv,
                          std::vector<WorkerPlacement>* out) {
  const double share = r.gpu_memory_gb * 1073741824.0;
  for (WorkerPlacement& w : *out) {
    uint64_t total = 0;
    for (const UsableGpu& d : usable.devices)
      if (d.id == w.gpu) total = DeviceMemoryBytes(inv, d);
    if (total == 0)
      return Status::InvalidArgument("/resources/gpu_memory_gb: the memory of GPU '" + w.gpu +
                                     "' is unknown (GPUs from " + inv.source +
                                     (w.gpu.rfind("MIG-", 0) == 0 ? "; a MIG instance" : "") +
                                     "), so its share cannot be capped; use whole GPUs (0)");
    if (share > static_cast<double>(total))
      return Status::InvalidArgument("/resources/gpu_memory_gb: " + Gb(r.gpu_memory_gb) + " GB is more than GPU '" + w.gpu + "' has (" +
                                     Gb(static_cast<double>(total) / 1073741824.0) + " GB)");
    w.memory_fraction = share / r.workers_per_gpu / static_cast<double>(total);
    w.memory_limit_mb = share / r.workers_per_gpu / 1048576.0;
  }
  return Status::Ok();
}

}  // namespace

std::vector<GpuCandidate> Candidates(const UsableGpus& usable) {
  std::vector<GpuCandidate> out;
  for (const UsableGpu& d : usable.devices) out.push_back({d.id, d.gpu_index});
  return out;
}

std::string UsableWhat(const GpuInventory& inv, const UsableGpus& usable) {
  const size_t n = usable.devices.size();
  std::string given = usable.inherited ? "CUDA_VISIBLE_DEVICES=" + *usable.inherited + " of this process"
                                       : std::to_string(inv.gpus.size()) + " GPU(s) found (" + inv.source + ")";
  return "the " + std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + " this process may use (" + given + ")";
}

GpuDiscovery DiscoverThisProcess() {
  GpuDiscovery d;
  std::string nvml_note;
  d.nvml = Nvml::Open(&nvml_note);
  d.inventory = DiscoverGpus(d.nvml.get());
  if (!d.nvml && d.inventory.source != "ENSEMBLED_GPU_COUNT") d.inventory.note = nvml_note;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) d.inherited = v;
  d.usable = ResolveUsable(d.inventory, d.inherited);
  return d;
}

StatusOr<std::vector<WorkerPlacement>> PlanWorkers(const ResourcesSpec& r, const UsableGpus& usable,
                                                   const GpuInventory& inv) {
  std::vector<std::string> ids;
  if (r.gpus.kind == GpuSelection::Kind::kList && inv.gpus.empty() && !usable.inherited) {
    ids = r.gpus.list;  // nothing to check against: as configured (the worker checks what CUDA sees)
  } else {
    StatusOr<std::vector<std::string>> picked =
        ResolveGpuSelection(r.gpus, Candidates(usable), "/resources/gpus", UsableWhat(inv, usable));
    if (!picked.ok()) return picked.status();
    ids = std::move(*picked);
  }
  std::vector<WorkerPlacement> out;
  if (ids.empty()) {
    for (int i = 0; i < r.cpu_workers; ++i) out.push_back({i, ""});
    return out;
  }
  for (const auto& g : ids)
    for (int k = 0; k < r.workers_per_gpu; ++k) out.push_back({static_cast<int>(out.size()), g});
  if (r.gpu_memory_gb > 0) {
    if (Status s = SetMemoryFractions(r, usable, inv, &out); !s.ok()) return s;
  }
  return out;
}

std::string DescribeInventory(const GpuInventory& inv) {
  std::string s = std::to_string(inv.gpus.size()) + " GPU(s) from " + inv.source;
  if (!inv.note.empty()) s += " (" + inv.note + ")";
  for (const auto& g : inv.gpus) {
    s += "; " + Label(g);
    if (!g.pci_bus_id.empty()) s += " at " + g.pci_bus_id;
    if (!g.mig_uuids.empty()) s += ", MIG: " + std::to_string(g.mig_uuids.size()) + " instance(s)";
  }
  return s;
}

}  // namespace ens
