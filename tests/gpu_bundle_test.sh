#!/usr/bin/env bash
# scripts/gpu-bundle: the folder made for a lent GPU machine is under 64 MiB, its programs need
# nothing outside it but glibc and the torch wheel's libraries, it carries the lane kernel's CPU
# reference members, and gpu-check's CPU side passes
# with it in a bare Debian 12 root (python3 and the wheel only: scripts/gpu-bundle-bare-check).
#   tests/gpu_bundle_test.sh BUILD_DIR
# Skipped (77) without root or patchelf, or when the Debian mirror cannot be reached for the root.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: gpu_bundle_test.sh BUILD_DIR}"
[[ $EUID == 0 ]] || { echo "not root: cannot make the bare root"; exit 77; }
command -v patchelf >/dev/null || { echo "no patchelf (scripts/setup installs it)"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bundle="$work/bundle"
ENSEMBLED_BUILD_DIR="$build" ENSEMBLED_BUNDLE_NO_BUILD=1 "$root/scripts/gpu-bundle" "$bundle" || { echo "FAILED: gpu-bundle"; exit 1; }
size=$(du -sm "$bundle" | cut -f1)
echo "bundle: $size MiB"
(( size <= 64 )) || { echo "FAILED: over 64 MiB"; exit 1; }
torch_lib="$("${ENSEMBLED_VENV:-$HOME/.cache/ensembled/venv}/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
glibc='^(linux-vdso|/lib64/ld-linux|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libutil\.so)'
for b in ensembled ensemblectl ensemble-worker; do
  [[ "$(patchelf --print-rpath "$bundle/$b")" == '$ORIGIN/lib' ]] || { echo "FAILED: $b's RUNPATH"; exit 1; }
  while read -r name _ path _; do
    [[ "$name" =~ $glibc ]] && continue
    case "$path" in
      "$bundle"/lib/*|"$torch_lib"/*|*/site-packages/*) ;;
      *) echo "FAILED: $b takes $name from $path, outside the bundle"; exit 1 ;;
    esac
  done < <(LD_LIBRARY_PATH="$torch_lib" ldd "$bundle/$b" | awk '$2 == "=>" {print $1, $2, $3, $4}')
done
echo "every library resolves in the bundle, glibc or the wheel"
out="$work/out"
mkdir -p "$out"
OUT="$out" ENSEMBLED_BARE_ROOT="${ENSEMBLED_BARE_ROOT:-/var/cache/ensembled/bare-bookworm}" \
  "$root/scripts/gpu-bundle-bare-check" "$bundle" >"$out/log" 2>&1
rc=$?
tail -5 "$out/log"
if [[ $rc != 0 ]] && grep -qE "Failed getting release file|Temporary failure resolving|Could not resolve|Unable to connect" "$out/log"; then
  echo "the Debian mirror cannot be reached: no bare root"; exit 77
fi
[[ $rc == 0 ]] || { echo "FAILED: gpu-check --cpu-side in the bare root exited $rc"; cat "$out/bare-check.stderr" 2>/dev/null | tail -20; exit 1; }
python3 - "$out/bare-check.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["first_task"]["ok"], r["first_task"]
assert r["same_twice"]["bitwise_equal"] == 2, r["same_twice"]
assert r["predict_export"]["predict_exit_code"] == 0 and r["predict_export"]["export_exit_code"] == 0, r["predict_export"]
lb = r["lane_bits"]
assert lb["ok"] and lb["lanes_p4096"]["members"] == 4096 and lb["lanes_mixed"]["engines"] == ["lanes"], lb
print("bare root: first task, the same member twice bit for bit, the bundle's lane members again bit for bit "
      "(alone, packs of 7, 512 and 4096, mixed shapes), predict and export: ok")
PY
