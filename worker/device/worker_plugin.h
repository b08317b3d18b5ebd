// OpenWorkerPlugin: a shared library of ours that GPU workers load on first use from the
// worker's own folder (libens_lane_cuda.so: lane_launcher.h), or from the path an environment
// variable names (tests, bundles).
// No libtorch. Thread-safe (dlopen is).
#pragma once

#include <string>

#include "common/base/env_vars.h"

namespace ens {

struct WorkerPlugin {
  void* handle = nullptr;  // dlopen's, or nullptr
  std::string path;        // what was opened (or tried)
  std::string error;       // with handle nullptr: "cannot load PATH: the loader's reason"
};

// `file` beside /proc/self/exe, unless the variable `var` is set and not empty (then its path).
// The library is never closed (its code stays in use until exit).
WorkerPlugin OpenWorkerPlugin(EnvVar var, const char* file);

}  // namespace ens
