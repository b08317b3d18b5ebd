// A fake NVML (libnvidia-ml) for the tests: exports the entry points ensembled calls
// (orchestrator/gpu/nvml.cpp) with behaviour set by environment variables. The daemon is pointed
// at it with ENSEMBLED_NVML_LIBRARY.
//   FAKE_NVML_GPUS=N           N GPUs (default 0). GPU i: UUID GPU-fa4e00<ii>-0000-4000-8000-000000000000,
//                              PCI bus 0x10 * (i + 1), 144 GiB, "Fake NVIDIA H200".
//   FAKE_NVML_REVERSED=1       lists them in reverse PCI order (NVML's order is not PCI order).
//   FAKE_NVML_MIG=i:k[,...]    GPU i in MIG mode with k instances, MIG-fa4e00<ii>-<kkkk>-4000-8000-000000000000.
//   FAKE_NVML_INIT_ERROR=e     nvmlInit_v2 returns e.
// Processes: every child of the calling process whose environment pins it to a GPU (its
// CUDA_VISIBLE_DEVICES is that GPU's or one of its MIG instances' UUID) holds 256 MiB there;
// memory used = 1 GiB + those. Utilisation 37 %, 45 C, 123.456 W.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotFound = 6, kInsufficientSize = 7;
constexpr unsigned long long kMiB = 1048576ULL;

struct Dev {
  int gpu = 0;   // physical index (PCI order)
  int mig = -1;  // MIG instance, -1 for the GPU itself
};

struct Fake {
  std::vector<Dev> gpus;                 // in NVML's (listing) order
  std::vector<std::vector<Dev>> migs;    // per physical GPU
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

Fake& State() {
  static Fake f = [] {
    Fake s;
    int n = EnvInt("FAKE_NVML_GPUS", 0);
    s.migs.resize(static_cast<size_t>(std::max(n, 0)));
    for (int i = 0; i < n; ++i) s.gpus.push_back({EnvInt("FAKE_NVML_REVERSED", 0) ? n - 1 - i : i, -1});
    if (const char* m = std::getenv("FAKE_NVML_MIG")) {
      std::stringstream ss(m);
      for (std::string item; std::getline(ss, item, ',');) {
        int g = 0, k = 0;
        if (std::sscanf(item.c_str(), "%d:%d", &g, &k) == 2 && g >= 0 && g < n)
          for (int j = 0; j < k; ++j) s.migs[static_cast<size_t>(g)].push_back({g, j});
      }
    }
    return s;
  }();
  return f;
}

const Dev* AsDev(void* h) { return static_cast<const Dev*>(h); }

std::string Uuid(const Dev& d) {
  char b[64];
  if (d.mig < 0) std::snprintf(b, sizeof(b), "GPU-fa4e00%02d-0000-4000-8000-000000000000", d.gpu);
  else std::snprintf(b, sizeof(b), "MIG-fa4e00%02d-%04d-4000-8000-000000000000", d.gpu, d.mig);
  return b;
}

int Copy(const std::string& s, char* out, unsigned int len) {
  if (len <= s.size()) return kInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

// The calling process's children pinned to GPU gpu (or one of its MIG instances).
std::vector<unsigned int> PinnedChildren(int gpu) {
  std::vector<unsigned int> out;
  std::vector<std::string> ids = {Uuid({gpu, -1})};
  for (const Dev& m : State().migs[static_cast<size_t>(gpu)]) ids.push_back(Uuid(m));
  std::string self = std::to_string(::getpid());
  std::ifstream kids("/proc/" + self + "/task/" + self + "/children");
  for (unsigned int pid; kids >> pid;) {
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
    std::string all((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    for (const auto& id : ids)
      if (all.find("CUDA_VISIBLE_DEVICES=" + id + '\0') != std::string::npos) out.push_back(pid);
  }
  return out;
}

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};
struct PciInfo {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return EnvInt("FAKE_NVML_INIT_ERROR", kSuccess); }
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = static_cast<unsigned int>(State().gpus.size());
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** h) {
  if (i >= State().gpus.size()) return kInvalidArgument;
  *h = &State().gpus[i];
  return kSuccess;
}
int nvmlDeviceGetUUID(void* h, char* out, unsigned int len) { return Copy(Uuid(*AsDev(h)), out, len); }
int nvmlDeviceGetName(void* h, char* out, unsigned int len) { return Copy("Fake NVIDIA H200", out, len); }
int nvmlDeviceGetMemoryInfo(void* h, Memory* m) {
  m->total = 144 * 1024 * kMiB;
  m->used = 1024 * kMiB + 256 * kMiB * PinnedChildren(AsDev(h)->gpu).size();
  m->free = m->total - m->used;
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* h, PciInfo* p) {
  std::memset(p, 0, sizeof(*p));
  p->bus = 0x10u * static_cast<unsigned int>(AsDev(h)->gpu + 1);
  std::snprintf(p->busId, sizeof(p->busId), "00000000:%02X:00.0", p->bus);
  std::snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "0000:%02X:00.0", p->bus);
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  u->gpu = 37;
  u->memory = 12;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void*, unsigned int, unsigned int* t) {
  *t = 45;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* mw) {
  *mw = 123456;
  return kSuccess;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* h, unsigned int* count, ProcessInfo* infos) {
  std::vector<unsigned int> pids = PinnedChildren(AsDev(h)->gpu);
  if (*count < pids.size()) {
    *count = static_cast<unsigned int>(pids.size());
    return kInsufficientSize;
  }
  for (size_t i = 0; i < pids.size(); ++i) infos[i] = {pids[i], 256 * kMiB, 0, 0};
  *count = static_cast<unsigned int>(pids.size());
  return kSuccess;
}
int nvmlDeviceGetMigMode(void* h, unsigned int* current, unsigned int* pending) {
  *current = *pending = State().migs[static_cast<size_t>(AsDev(h)->gpu)].empty() ? 0 : 1;
  return kSuccess;
}
int nvmlDeviceGetMaxMigDeviceCount(void* h, unsigned int* n) {
  *n = 7;
  return kSuccess;
}
int nvmlDeviceGetMigDeviceHandleByIndex(void* h, unsigned int k, void** out) {
  auto& m = State().migs[static_cast<size_t>(AsDev(h)->gpu)];
  if (k >= m.size()) return kNotFound;
  *out = &m[k];
  return kSuccess;
}

}  // extern "C"
