// CudaGraphs: capture and replay of a piece of GPU work as one CUDA graph, for PackStep's
// steps (resources.cuda_graphs, config.h).
//
// The worker links libtorch's CPU half only (cuda_support.h), so at::cuda::CUDAGraph is reached
// through a small plugin linked against libtorch_cuda, libens_cuda_graph.so (built beside the
// worker where the CUDA toolkit is, worker/cuda_graph_plugin.cpp), loaded on first use from the
// worker's folder (or ENSEMBLED_CUDA_GRAPH_LIB). Capture runs the work on a side stream ordered
// after the current one (its kernels are recorded, not run) and then replays it once, so a
// captured step has also run; later Replay() calls launch the graph on the current stream.
// Every failure is a Status (no plugin, no CUDA, a capture CUDA refuses): the caller falls back.
// Not thread-safe.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace ens {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Captures `work` and runs it once. REQUIRES: not captured yet.
  Status Capture(const std::function<void()>& work);
  // Runs the captured work again. REQUIRES: Capture returned OK.
  Status Replay();
  bool captured() const { return graph_ != nullptr; }

 private:
  void* graph_ = nullptr;
};

}  // namespace ens
