#include "worker/cuda_graphs.h"

#include <dlfcn.h>

#include "worker/worker_plugin.h"

namespace ens {
namespace {

// The plugin's functions (worker/cuda_graph_plugin.cpp); `err` gets a message on failure.
using CaptureFn = void* (*)(void (*work)(void*), void* arg, char* err, size_t err_len);
using ReplayFn = int (*)(void* graph, char* err, size_t err_len);
using FreeFn = void (*)(void* graph);

struct Plugin {
  CaptureFn capture = nullptr;
  ReplayFn replay = nullptr;
  FreeFn free = nullptr;
  std::string error;  // why it is not there
};

const Plugin& Loaded() {
  static const Plugin plugin = [] {
    Plugin p;
    const WorkerPlugin lib = OpenWorkerPlugin("ENSEMBLED_CUDA_GRAPH_LIB", "libens_cuda_graph.so");
    if (lib.handle == nullptr) {
      p.error = lib.error;
      return p;
    }
    p.capture = reinterpret_cast<CaptureFn>(::dlsym(lib.handle, "ens_graph_capture"));
    p.replay = reinterpret_cast<ReplayFn>(::dlsym(lib.handle, "ens_graph_replay"));
    p.free = reinterpret_cast<FreeFn>(::dlsym(lib.handle, "ens_graph_free"));
    if (p.capture == nullptr || p.replay == nullptr || p.free == nullptr) p.error = lib.path + ": not the ensembled plugin";
    return p;
  }();
  return plugin;
}

void RunWork(void* arg) { (*static_cast<const std::function<void()>*>(arg))(); }

}  // namespace

CudaGraph::~CudaGraph() {
  if (graph_ != nullptr) Loaded().free(graph_);
}

Status CudaGraph::Capture(const std::function<void()>& work) {
  const Plugin& p = Loaded();
  if (!p.error.empty()) return Status::Internal("CUDA graphs: " + p.error);
  char err[512] = "";
  void* g = p.capture(&RunWork, const_cast<std::function<void()>*>(&work), err, sizeof(err));
  if (g == nullptr) return Status::Internal(std::string("CUDA graphs: capture failed: ") + err);
  graph_ = g;
  return Replay();
}

Status CudaGraph::Replay() {
  char err[512] = "";
  if (Loaded().replay(graph_, err, sizeof(err)) != 0)
    return Status::Internal(std::string("CUDA graphs: replay failed: ") + err);
  return Status::Ok();
}

}  // namespace ens
