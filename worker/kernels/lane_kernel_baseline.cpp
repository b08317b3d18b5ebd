// The lane kernel's block code compiled for baseline x86-64 (SSE2) (lane_kernel.h; CMakeLists.txt sets the flags).
#define ENS_LANE_ENTRY LaneTrainWindowBaseline
#define ENS_LANE_PREDICT_ENTRY LaneForwardRowsBaseline
#include "worker/kernels/lane_kernel_body.inc"
