#include "worker/device/cuda_support.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "common/base/env_vars.h"
#include "common/base/fault_injection.h"

namespace ens {

namespace {

enum class Want { kNever, kMust, kIfPresent };

Want Wanted() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return Want::kIfPresent;
  return *visible == '\0' ? Want::kNever : Want::kMust;
}

}  // namespace

CudaSupportResult LoadCudaSupport() {
  if (Wanted() == Want::kNever) return {};
  const char* override_name = EnvVarValue(EnvVar::kTorchCudaLib);
  const char* name = override_name != nullptr && *override_name != '\0' ? override_name : "libtorch_cuda.so";
  // RTLD_GLOBAL: libtorch_cuda's symbols serve what loads after it, as when linked.
  // Never closed: its registrations live as long as the process.
  if (::dlopen(name, RTLD_NOW | RTLD_GLOBAL) != nullptr) return {CudaSupport::kLoaded, ""};
  const char* err = ::dlerror();
  return {CudaSupport::kUnavailable, err != nullptr ? err : std::string("cannot load ") + name};
}

Status RequireCudaSupport(const CudaSupportResult& r) {
  if (r.state != CudaSupport::kUnavailable || Wanted() != Want::kMust) return Status::Ok();
  return Status::InvalidArgument(std::string("this worker was given GPU ") + std::getenv("CUDA_VISIBLE_DEVICES") +
                                 " but libtorch's CUDA support did not load: " + r.detail);
}

namespace {

// What the CUDA driver reports about the first visible device: its UUID ("" and *why when none).
std::string DriverDeviceUuid(std::string* why) {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    *why = std::string("no CUDA driver: ") + (e != nullptr ? e : "libcuda.so.1 not found");
    return "";
  }
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using UuidFn = int (*)(unsigned char*, int);  // CUuuid is 16 bytes
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(h, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(::dlsym(h, "cuDeviceGet"));
  auto uuid = reinterpret_cast<UuidFn>(::dlsym(h, "cuDeviceGetUuid_v2"));
  if (uuid == nullptr) uuid = reinterpret_cast<UuidFn>(::dlsym(h, "cuDeviceGetUuid"));
  int n = 0, dev = 0;
  if (init == nullptr || count == nullptr || get == nullptr || uuid == nullptr) {
    *why = "the CUDA driver lacks cuInit/cuDeviceGetCount/cuDeviceGet/cuDeviceGetUuid";
    return "";
  }
  if (int r = init(0); r != 0) {
    *why = "cuInit failed with CUDA error " + std::to_string(r);
    return "";
  }
  if (count(&n) != 0 || n == 0) {
    *why = "CUDA sees no device";
    return "";
  }
  unsigned char b[16];
  if (get(&dev, 0) != 0 || uuid(b, dev) != 0) {
    *why = "CUDA cannot read its device's UUID";
    return "";
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

// "GPU-8f6c..." / "MIG-8f6c..." -> "8f6c..." (the driver reports the bare hex form).
std::string BareUuid(const std::string& id) {
  if (id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0) return id.substr(4);
  return id;
}

}  // namespace

bool IsGpuSlot() { return Wanted() == Want::kMust; }

Status CheckAssignedGpu() {
  if (Wanted() != Want::kMust) return Status::Ok();
  const std::string given = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string seen, why;
  if (std::optional<std::string> fake = CudaSeesRequested()) {
    if (*fake == "none") why = "CUDA sees no device (ENSEMBLED_TEST_CUDA_SEES)";
    else seen = *fake == "given" ? BareUuid(given) : BareUuid(*fake);
  } else {
    seen = DriverDeviceUuid(&why);
  }
  if (seen.empty())
    return Status::InvalidArgument("given GPU " + given + ", but " + why +
                                   " (check the driver, the container's GPU access and CUDA_VISIBLE_DEVICES)");
  const bool by_uuid = given.rfind("GPU-", 0) == 0 || given.rfind("MIG-", 0) == 0;
  // CUDA accepts a unique prefix of a UUID ("GPU-8f6c"), as an inherited CUDA_VISIBLE_DEVICES
  // may hold: the device seen must start with it.
  if (by_uuid && seen.rfind(BareUuid(given), 0) != 0)
    return Status::InvalidArgument("given GPU " + given + ", but CUDA sees a different device, " + seen);
  return Status::Ok();
}

}  // namespace ens
