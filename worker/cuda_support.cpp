#include "worker/cuda_support.h"

#include <dlfcn.h>

#include <cstdlib>

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
  const char* override_name = std::getenv("ENSEMBLED_TORCH_CUDA_LIB");
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

}  // namespace ens
