// DispatchCount: counts the ATen operators a piece of code dispatches, as a stand-in for the
// kernels it would launch on a GPU (tests/trainer_pack_step_test.cpp, bench/step_kernels.cpp).
//
// While a DispatchCount is alive, every operator that any thread dispatches through ATen
// (RecordFunction, scope FUNCTION) is counted when it is outermost: not called from inside
// another counted operator (mean's inner sum is part of mean). Operators that launch no kernel
// are not counted, and the operators they call count as outermost: views and metadata (view,
// narrow, select, transpose, expand, as_strided, ...), allocations without a fill (empty,
// empty_strided, empty_like), and the wrappers to/contiguous/reshape (a copy they make counts
// as its own copy_ or clone). Autograd's node wrappers are not operators (their ops are).
// What a counted operator launches on CUDA is usually one kernel; the exceptions we know of
// are noted beside the figures (BENCHMARKS.md).
// One at a time per process; not for production paths (each operator pays a callback).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ens {

class DispatchCount {
 public:
  DispatchCount();
  ~DispatchCount();
  DispatchCount(const DispatchCount&) = delete;
  DispatchCount& operator=(const DispatchCount&) = delete;

  // Operators counted so far, in all and by name ("aten::bmm").
  int64_t total() const;
  std::map<std::string, int64_t> by_name() const;
  void Reset();

 private:
  uint64_t handle_ = 0;
};

}  // namespace ens
