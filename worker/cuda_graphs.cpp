#include "worker/cuda_graphs.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

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
    std::string path;
    if (const char* env = std::getenv("ENSEMBLED_CUDA_GRAPH_LIB"); env != nullptr && *env != '\0') {
      path = env;
    } else {
      char exe[PATH_MAX];
      const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
      std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
      dir = dir.substr(0, dir.find_last_of('/') + 1);
      path = dir + "libens_cuda_graph.so";
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      p.error = "cannot load " + path + ": " + (e != nullptr ? e : "?");
      return p;
    }
    p.capture = reinterpret_cast<CaptureFn>(::dlsym(h, "ens_graph_capture"));
    p.replay = reinterpret_cast<ReplayFn>(::dlsym(h, "ens_graph_replay"));
    p.free = reinterpret_cast<FreeFn>(::dlsym(h, "ens_graph_free"));
    if (p.capture == nullptr || p.replay == nullptr || p.free == nullptr) p.error = path + ": not the ensembled plugin";
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
