#include "worker/kernels/lane_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/base/env_vars.h"

namespace ens {

// The block code of each ISA (lane_kernel_body.inc).
void LaneTrainWindowBaseline(const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch);
void LaneTrainWindowAvx2(const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch);
void LaneTrainWindowAvx512(const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch);
void LaneTrainWindowThread(const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch);
using ForwardRowsFn = void(const LaneNet&, const float*, const float*, int64_t, int64_t, float*, float*);
ForwardRowsFn LaneForwardRowsBaseline, LaneForwardRowsAvx2, LaneForwardRowsAvx512, LaneForwardRowsThread;

int64_t LaneNet::Params() const {
  int64_t p = 0;
  for (int64_t l = 0; l < layers; ++l) p += units[l] * ((l == 0 ? inputs : units[l - 1]) + 1);
  return p;
}

int64_t LaneNet::Weights() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += units[l] * (l == 0 ? inputs : units[l - 1]);
  return n;
}

int64_t LaneNet::ScratchFloats() const {
  int64_t hidden = 0, widest = inputs;
  for (int64_t l = 0; l < layers; ++l) {
    if (l + 1 < layers) hidden += units[l];
    widest = std::max(widest, units[l]);
  }
  // The block code's: gradient [P], a raw row [F + 1], features, adversarial features and the
  // features' gradient [F] each, pre-activations, activations and masked activations [hidden]
  // each, two layer gradients [widest].
  return kLaneWidth * (Params() + 4 * inputs + 1 + 3 * hidden + 2 * widest);
}

const char* Name(LaneIsa isa) {
  switch (isa) {
    case LaneIsa::kBaseline: return "baseline";
    case LaneIsa::kAvx2: return "avx2";
    case LaneIsa::kAvx512: return "avx512";
    case LaneIsa::kThread: return "thread";
  }
  return "?";
}

std::vector<LaneIsa> AvailableLaneIsas() {
  std::vector<LaneIsa> v = {LaneIsa::kBaseline};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) v.push_back(LaneIsa::kAvx2);
  if (__builtin_cpu_supports("avx512f")) v.push_back(LaneIsa::kAvx512);
  v.push_back(LaneIsa::kThread);
  return v;
}

LaneIsa ChosenLaneIsa() {
  const std::vector<LaneIsa> have = AvailableLaneIsas();
  if (const char* want = EnvVarValue(EnvVar::kLaneIsa))
    for (LaneIsa isa : have)
      if (std::strcmp(want, Name(isa)) == 0) return isa;
  return have[have.size() - 2];  // the widest vector ISA (kThread is last)
}

void LaneTrainWindow(LaneIsa isa, const LaneNet& net, const LaneBlock& block, const LaneWindow& w, float* scratch) {
  switch (isa) {
    case LaneIsa::kAvx512: return LaneTrainWindowAvx512(net, block, w, scratch);
    case LaneIsa::kAvx2: return LaneTrainWindowAvx2(net, block, w, scratch);
    case LaneIsa::kBaseline: return LaneTrainWindowBaseline(net, block, w, scratch);
    case LaneIsa::kThread: return LaneTrainWindowThread(net, block, w, scratch);
  }
}

void LaneForwardRows(LaneIsa isa, const LaneNet& net, const float* params, const float* x, int64_t x_stride, int64_t n,
                     float* out, float* scratch) {
  switch (isa) {
    case LaneIsa::kAvx512: return LaneForwardRowsAvx512(net, params, x, x_stride, n, out, scratch);
    case LaneIsa::kAvx2: return LaneForwardRowsAvx2(net, params, x, x_stride, n, out, scratch);
    case LaneIsa::kBaseline: return LaneForwardRowsBaseline(net, params, x, x_stride, n, out, scratch);
    case LaneIsa::kThread: return LaneForwardRowsThread(net, params, x, x_stride, n, out, scratch);
  }
}

}  // namespace ens
