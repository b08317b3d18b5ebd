// The lane kernel's block code compiled for AVX-512F (lane_kernel.h; CMakeLists.txt sets the flags).
#define ENS_LANE_ENTRY LaneTrainWindowAvx512
#define ENS_LANE_PREDICT_ENTRY LaneForwardRowsAvx512
#include "worker/kernels/lane_kernel_body.inc"
