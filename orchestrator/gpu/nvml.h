// Nvml: the NVIDIA Management Library, opened with dlopen when the supervisor starts.
//
// The supervisor links neither CUDA nor libtorch and must run where there is no NVIDIA driver,
// so NVML is optional: Open() returns nullptr (and says why) when libnvidia-ml.so.1 is absent or
// nvmlInit fails. ENSEMBLED_NVML_LIBRARY names another file to open (the tests' fake NVML,
// tests/fakes/fake_nvml.cpp). Only the entry points below are used; their C types are declared
// in nvml.cpp from NVML's documented ABI, so no NVIDIA header is needed to build.
// Reading NVML holds no GPU context and is cheap (microseconds per call): the supervisor samples
// every few seconds. One instance per process; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ens {

// One physical GPU as NVML reports it.
struct NvmlDevice {
  std::string uuid;        // "GPU-..."
  std::string name;        // "NVIDIA H200"
  std::string pci_bus_id;  // "00000000:3B:00.0"
  uint64_t memory_total_bytes = 0;
  std::vector<std::string> mig_uuids;  // "MIG-..." of its MIG instances (MIG mode on), in order
};

// A GPU process and the device memory it holds.
struct NvmlProcess {
  int64_t pid = 0;
  uint64_t used_bytes = 0;
};

// One sample of one GPU. A reading NVML could not take (not supported on that GPU) is -1.
struct NvmlSample {
  std::string uuid;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  int utilization_pct = -1;
  int temperature_c = -1;
  double power_w = -1;
  std::vector<NvmlProcess> processes;
};

class Nvml {
 public:
  // nullptr when NVML cannot be used here; *why_not says why.
  static std::unique_ptr<Nvml> Open(std::string* why_not);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // The GPUs in NVML's order.
  std::vector<NvmlDevice> Devices() const;
  // One sample per GPU, in NVML's order.
  std::vector<NvmlSample> Sample() const;
  const std::string& library() const { return library_; }

  struct Api;  // the resolved entry points (nvml.cpp)

 private:
  Nvml() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string library_;
};

}  // namespace ens
