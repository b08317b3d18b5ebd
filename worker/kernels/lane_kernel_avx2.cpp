// The lane kernel's block code compiled for AVX2 (lane_kernel.h; CMakeLists.txt sets the flags).
#define ENS_LANE_ENTRY LaneTrainWindowAvx2
#define ENS_LANE_PREDICT_ENTRY LaneForwardRowsAvx2
#include "worker/kernels/lane_kernel_body.inc"
