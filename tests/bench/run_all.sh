#!/usr/bin/env bash
# Runs every benchmark in build/bench/ and every tests/bench/*.sh; each prints its own ratios.
set -u
cd "$(dirname "$0")/../.."
status=0
for b in "${BUILD:-build}"/bench/*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b") =="
  if [ "$(basename "$b")" = train_gpu_check ]; then
    # The GPU backend against the CPU trainer: only where `make cuda` built the library.
    lib=${SL_CUDA_LIB:-${BUILD:-build}/libsl_train_cuda.so}
    if [ -f "$lib" ]; then SL_CUDA_LIB=$lib "$b" cuda || status=1
    else echo "skipped: no $lib (make cuda, where nvcc and a GPU exist)"; fi
    continue
  fi
  "$b" || status=1
done
for s in tests/bench/*.sh; do
  [ "$(basename "$s")" = run_all.sh ] && continue
  [ -e "$s" ] || continue
  echo "== $s =="
  bash "$s" || status=1
done
exit $status
