#include "worker/device/worker_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace ens {

WorkerPlugin OpenWorkerPlugin(EnvVar var, const char* file) {
  WorkerPlugin p;
  if (const char* v = EnvVarValue(var); v != nullptr && *v != '\0') {
    p.path = v;
  } else {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const std::string self = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
    p.path = self.substr(0, self.find_last_of('/') + 1) + file;
  }
  p.handle = ::dlopen(p.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) {
    const char* e = ::dlerror();
    p.error = "cannot load " + p.path + ": " + (e != nullptr ? e : "?");
  }
  return p;
}

}  // namespace ens
