// libens_cuda_graph.so: at::cuda::CUDAGraph behind three C functions, for worker/cuda_graphs.h.
// Linked against libtorch_cuda (the worker itself links libtorch's CPU half only); built where
// the CUDA toolkit is. Each function catches everything and reports it in `err`.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <exception>
#include <memory>

namespace {

void Say(char* err, size_t len, const char* what) {
  if (err != nullptr && len > 0) std::snprintf(err, len, "%s", what);
}

}  // namespace

extern "C" {

// Records work(arg) on a side stream that waits for the current one, into a new graph; the
// current stream then waits for the side stream. Nothing is run. Returns the graph, or null.
void* ens_graph_capture(void (*work)(void*), void* arg, char* err, size_t err_len) {
  try {
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent before;
    before.record(current);
    before.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      graph->capture_begin();
      try {
        work(arg);
      } catch (...) {
        try {
          graph->capture_end();  // leaves the stream out of capture mode
        } catch (...) {
        }
        throw;
      }
      graph->capture_end();
    }
    at::cuda::CUDAEvent after;
    after.record(side);
    after.block(current);
    return graph.release();
  } catch (const std::exception& e) {
    Say(err, err_len, e.what());
  } catch (...) {
    Say(err, err_len, "unknown error");
  }
  return nullptr;
}

int ens_graph_replay(void* graph, char* err, size_t err_len) {
  try {
    static_cast<at::cuda::CUDAGraph*>(graph)->replay();
    return 0;
  } catch (const std::exception& e) {
    Say(err, err_len, e.what());
  } catch (...) {
    Say(err, err_len, "unknown error");
  }
  return 1;
}

void ens_graph_free(void* graph) {
  try {
    delete static_cast<at::cuda::CUDAGraph*>(graph);
  } catch (...) {
  }
}

}  // extern "C"
