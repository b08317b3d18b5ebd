#include "orchestrator/gpu/nvml.h"

#include <dlfcn.h>

#include <cstdlib>

#include "common/base/env_vars.h"

namespace ens {

namespace {

// NVML's C ABI, as documented (nvml.h): return codes, an opaque device handle, and the
// structs of the calls used here.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
constexpr unsigned int kNvmlTemperatureGpu = 0;
constexpr unsigned int kNvmlStringBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE / NAME_V2

template <typename F>
bool Resolve(void* h, const char* name, F* f) {
  *f = reinterpret_cast<F>(::dlsym(h, name));
  return *f != nullptr;
}

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  // Optional: a GPU or a driver without them reads as "not supported".
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned int, unsigned int*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*mig_max)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
};

std::unique_ptr<Nvml> Nvml::Open(std::string* why_not) {
  const char* forced = EnvVarValue(EnvVar::kNvmlLibrary);
  const std::string lib = forced != nullptr && *forced != '\0' ? forced : "libnvidia-ml.so.1";
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = ::dlerror();
    *why_not = "NVML not loaded (" + (err != nullptr ? std::string(err) : lib) + ")";
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  bool ok = Resolve(h, "nvmlInit_v2", &api->init) && Resolve(h, "nvmlShutdown", &api->shutdown) &&
            Resolve(h, "nvmlDeviceGetCount_v2", &api->count) &&
            Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &api->by_index) &&
            Resolve(h, "nvmlDeviceGetUUID", &api->uuid) && Resolve(h, "nvmlDeviceGetName", &api->name) &&
            Resolve(h, "nvmlDeviceGetMemoryInfo", &api->memory) && Resolve(h, "nvmlDeviceGetPciInfo_v3", &api->pci);
  if (!ok) {
    *why_not = "NVML in " + lib + " lacks an entry point ensembled needs";
    ::dlclose(h);
    return nullptr;
  }
  Resolve(h, "nvmlDeviceGetUtilizationRates", &api->utilization);
  Resolve(h, "nvmlDeviceGetTemperature", &api->temperature);
  Resolve(h, "nvmlDeviceGetPowerUsage", &api->power);
  Resolve(h, "nvmlDeviceGetComputeRunningProcesses_v3", &api->processes);
  Resolve(h, "nvmlDeviceGetMigMode", &api->mig_mode);
  Resolve(h, "nvmlDeviceGetMaxMigDeviceCount", &api->mig_max);
  Resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", &api->mig_by_index);
  if (nvmlReturn_t r = api->init(); r != kNvmlSuccess) {
    *why_not = "nvmlInit failed with NVML error " + std::to_string(r) + " (" + lib + ")";
    ::dlclose(h);
    return nullptr;
  }
  std::unique_ptr<Nvml> n(new Nvml());
  n->handle_ = h;
  n->api_ = std::move(api);
  n->library_ = lib;
  return n;
}

Nvml::~Nvml() {
  if (api_) api_->shutdown();
  // Never dlclose: NVML keeps threads of its own on some drivers.
}

namespace {

std::string Text(nvmlReturn_t (*f)(nvmlDevice_t, char*, unsigned int), nvmlDevice_t d) {
  char buf[kNvmlStringBytes] = {};
  if (f(d, buf, sizeof(buf)) != kNvmlSuccess) return "";
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

std::vector<nvmlDevice_t> Handles(const Nvml::Api& a) {
  unsigned int n = 0;
  std::vector<nvmlDevice_t> out;
  if (a.count(&n) != kNvmlSuccess) return out;
  for (unsigned int i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    if (a.by_index(i, &d) == kNvmlSuccess) out.push_back(d);
  }
  return out;
}

}  // namespace

std::vector<NvmlDevice> Nvml::Devices() const {
  std::vector<NvmlDevice> out;
  for (nvmlDevice_t d : Handles(*api_)) {
    NvmlDevice g;
    g.uuid = Text(api_->uuid, d);
    g.name = Text(api_->name, d);
    nvmlPciInfo_t pci{};
    if (api_->pci(d, &pci) == kNvmlSuccess) {
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      g.pci_bus_id = pci.busId;
    }
    nvmlMemory_t mem{};
    if (api_->memory(d, &mem) == kNvmlSuccess) g.memory_total_bytes = mem.total;
    unsigned int current = 0, pending = 0, max_mig = 0;
    if (api_->mig_mode && api_->mig_max && api_->mig_by_index && api_->mig_mode(d, &current, &pending) == kNvmlSuccess &&
        current == 1 && api_->mig_max(d, &max_mig) == kNvmlSuccess) {
      for (unsigned int k = 0; k < max_mig; ++k) {
        nvmlDevice_t m = nullptr;
        if (api_->mig_by_index(d, k, &m) != kNvmlSuccess) continue;  // an empty MIG slot
        std::string u = Text(api_->uuid, m);
        if (!u.empty()) g.mig_uuids.push_back(u);
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<NvmlSample> Nvml::Sample() const {
  std::vector<NvmlSample> out;
  for (nvmlDevice_t d : Handles(*api_)) {
    NvmlSample s;
    s.uuid = Text(api_->uuid, d);
    nvmlMemory_t mem{};
    if (api_->memory(d, &mem) == kNvmlSuccess) {
      s.memory_used_bytes = mem.used;
      s.memory_total_bytes = mem.total;
    }
    nvmlUtilization_t u{};
    if (api_->utilization && api_->utilization(d, &u) == kNvmlSuccess) s.utilization_pct = static_cast<int>(u.gpu);
    unsigned int t = 0, mw = 0;
    if (api_->temperature && api_->temperature(d, kNvmlTemperatureGpu, &t) == kNvmlSuccess)
      s.temperature_c = static_cast<int>(t);
    if (api_->power && api_->power(d, &mw) == kNvmlSuccess) s.power_w = mw / 1000.0;
    if (api_->processes) {
      nvmlProcessInfo_t infos[256];
      unsigned int n = 256;
      if (api_->processes(d, &n, infos) == kNvmlSuccess)
        for (unsigned int i = 0; i < n && i < 256; ++i)  // ~0: NVML_VALUE_NOT_AVAILABLE (e.g. no permission)
          s.processes.push_back({infos[i].pid, infos[i].usedGpuMemory == ~0ULL ? 0 : infos[i].usedGpuMemory});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ens
