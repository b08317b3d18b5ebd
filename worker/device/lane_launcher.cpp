#include "worker/device/lane_launcher.h"

#include <dlfcn.h>

#include <string>

#include "worker/device/worker_plugin.h"

namespace ens {
namespace {

// The plugin's functions (worker/kernels/lane_kernel_cuda.cu).
using AbiFn = int (*)();
using WindowFn = int (*)(const LaneNet* net, const LanePackWindow* w, char* err, size_t err_len);

// The layout the plugin must have been built for (its ens_lane_cuda_abi()).
int OurAbi() { return static_cast<int>(sizeof(LaneNet) * 1000003 + sizeof(LanePackWindow)); }

struct Plugin {
  WindowFn window = nullptr;
  std::string error;  // why it is not there
};

const Plugin& Loaded() {
  static const Plugin plugin = [] {
    Plugin p;
    const WorkerPlugin lib = OpenWorkerPlugin(EnvVar::kLaneCudaLib, "libens_lane_cuda.so");
    if (lib.handle == nullptr) {
      p.error = lib.error;
      return p;
    }
    auto abi = reinterpret_cast<AbiFn>(::dlsym(lib.handle, "ens_lane_cuda_abi"));
    auto window = reinterpret_cast<WindowFn>(::dlsym(lib.handle, "ens_lane_cuda_window"));
    if (abi == nullptr || window == nullptr) {
      p.error = lib.path + ": not the ensembled lane kernel";
    } else if (abi() != OurAbi()) {
      p.error = lib.path + ": built for another layout of the lane kernel's structs (rebuild it with the worker)";
    } else {
      p.window = window;
    }
    return p;
  }();
  return plugin;
}

class CudaLaneLauncher final : public LaneLauncher {
 public:
  explicit CudaLaneLauncher(WindowFn fn) : fn_(fn) {}
  Status Window(const LaneNet& net, const LanePackWindow& w) override {
    char err[512] = {};
    if (fn_(&net, &w, err, sizeof err) != 0) return Status::Internal(std::string("CUDA error: ") + err);
    ++launches_;
    return Status::Ok();
  }

 private:
  WindowFn fn_;
};

class HostLaneLauncher final : public LaneLauncher {
 public:
  Status Window(const LaneNet& net, const LanePackWindow& w) override {
    LaneLaunchOnHost(net, w);
    ++launches_;
    return Status::Ok();
  }
};

}  // namespace

StatusOr<std::unique_ptr<LaneLauncher>> LoadCudaLaneLauncher() {
  const Plugin& p = Loaded();
  if (p.window == nullptr) return Status::NotFound(p.error);
  return std::unique_ptr<LaneLauncher>(std::make_unique<CudaLaneLauncher>(p.window));
}

std::unique_ptr<LaneLauncher> NewHostLaneLauncher() { return std::make_unique<HostLaneLauncher>(); }

}  // namespace ens
