// The guard of the CPU-only kernels (mlp_kernel.h, optimizer_kernel.h, loss_kernel.h).
//
// Those kernels read and write data_ptr<float>() of their operands: on a CUDA tensor that is a
// device address, on a meta tensor none. Every function that hands them tensors calls
// RequireCpu first, and its callers pick the CPU kernel only for tensors that are is_cpu()
// (never "not is_cuda()": meta, MPS or XPU tensors are not CPU tensors either). A tensor
// elsewhere gets a c10::Error that names the kernel and the device: a task error
// (device_runtime.h), not a crash.
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
#pragma once

#include <torch/torch.h>

namespace ens {

inline void RequireCpu(const char* kernel, torch::TensorList tensors) {
  for (const torch::Tensor& t : tensors)
    TORCH_CHECK(!t.defined() || t.is_cpu(), kernel, " is a CPU kernel: it was given a tensor on ", t.device(),
                " (the CUDA path runs tensor ops instead)");
}

}  // namespace ens
