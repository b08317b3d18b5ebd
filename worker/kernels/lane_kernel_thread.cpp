// The lane kernel's block code in its CUDA form, one member a thread, compiled for the host
// (lane_kernel.h LaneIsa::kThread; CMakeLists.txt sets the flags): the function each CUDA
// thread runs in lane_kernel_cuda.cu, run here for a block's 16 lanes one after the other.
#define ENS_LANE_THREAD
#define ENS_LANE_ENTRY LaneTrainWindowThread
#define ENS_LANE_PREDICT_ENTRY LaneForwardRowsThread
#include "worker/kernels/lane_kernel_body.inc"
