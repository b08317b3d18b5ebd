#!/usr/bin/env bash
# scripts/gpu-check on a machine without a CUDA device: exit 2 and say there is nothing to
# check, having built and run nothing. On a machine with a GPU this test is skipped (77): the
# check itself is run by hand there (it takes minutes).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "a CUDA device is present: run scripts/gpu-check by hand"; exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
err="$(OUT="$out" "$root/scripts/gpu-check" 2>&1 >/dev/null)"
rc=$?
echo "exit $rc: $err"
[[ $rc == 2 ]] || { echo "FAILED: expected exit 2"; exit 1; }
[[ "$err" == *"no CUDA device: nothing to check"* ]] || { echo "FAILED: message"; exit 1; }
[[ -z "$(ls -A "$out")" ]] || { echo "FAILED: wrote results without a GPU"; exit 1; }
echo "ok"
