#!/usr/bin/env bash
# The lane kernel's CUDA build keeps the host's IEEE float operations: in the PTX nvcc makes of
# worker/kernels/lane_kernel_cuda.cu with the build's flags (CMakeLists.txt ENS_LANE_CUDA_FLAGS), every
# float multiply, add, subtract, division and square root is an exactly rounded one (.rn), and
# there is no fused multiply-add, no approximate division, sqrt or exponent, and no flush to
# zero. Then the kernel's bits are the thread form's that lane_kernel_test runs on the CPU.
# Skips (77) where the build had no nvcc (no PTX was made).
set -euo pipefail
ptx="$1/lane_kernel_cuda.ptx"
[[ -f "$ptx" ]] || { echo "no $ptx: this build had no nvcc"; exit 77; }
fail=0
forbid() {  # pattern, what it means
  if grep -nE "$1" "$ptx" | head -5 | grep .; then echo "FAIL: $2"; fail=1; fi
}
forbid '\bfma\.[a-z.]*f32' "a fused multiply-add in float"
forbid '\bmad\.[a-z.]*f32' "a multiply-add in float"
forbid '\.ftz' "a flush-to-zero operation"
forbid '\.approx' "an approximate operation (division, sqrt, ex2, lg2, rcp)"
forbid '\b(div|sqrt|rcp)\.full' "a not exactly rounded division or square root"
for op in mul add sub div sqrt; do
  n=$(grep -cE "\b$op\.rn\.f32" "$ptx" || true)
  bad=$(grep -E "\b$op\.f32" "$ptx" | head -3 || true)
  [[ -z "$bad" ]] || { echo "FAIL: $op.f32 without a rounding mode: $bad"; fail=1; }
  echo "$op.rn.f32: $n"
done
[[ $(grep -cE '\bmul\.rn\.f32' "$ptx") -gt 0 ]] || { echo "FAIL: no float multiply at all: not the lane kernel?"; fail=1; }
grep -q 'LaneWindowKernel' "$ptx" || { echo "FAIL: the kernel is not in the PTX"; fail=1; }
[[ $fail -eq 0 ]] && echo "the lane kernel's PTX keeps IEEE float operations"
exit $fail
