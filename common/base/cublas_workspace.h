// cuBLAS's workspace setting for deterministic CUDA training.
//
// With deterministic algorithms on (trainer.h: ConfigureTorchForDeterminism), libtorch refuses
// or may repeat cuBLAS calls unless CUBLAS_WORKSPACE_CONFIG fixes cuBLAS's workspace before CUDA
// starts. The supervisor puts it in every worker's environment (worker_pool.cpp) and verify in
// its own; a worker started by hand sets it itself (worker/process/main.cpp). A value the user set is
// kept (":16:8" is as deterministic, with less memory).
#pragma once

#include <string>

namespace ens {

inline constexpr const char* kCublasWorkspaceVariable = "CUBLAS_WORKSPACE_CONFIG";
inline constexpr const char* kCublasWorkspaceConfig = ":4096:8";

// Sets CUBLAS_WORKSPACE_CONFIG to kCublasWorkspaceConfig when it is unset or empty; returns the
// value in force afterwards. Call at the start of main, before anything initialises CUDA.
std::string EnsureCublasWorkspaceConfig();

}  // namespace ens
