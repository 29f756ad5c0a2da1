#!/usr/bin/env bash
# gpu_bundle.sh [BINARY...]: what a trip to the lent GPU machine carries (models/GPU_INFERENCE.md,
# "Measured"), written to build/gpu-h/bundle.tar.xz:
#  - speclab and infer_gpu_check, linked here against GSL's reference CBLAS instead of OpenBLAS
#    (the machine has none of Debian's libraries; only the trainer calls BLAS, inference does not;
#    openblas_set_num_threads becomes a no-op);
#  - libsl_infer_cuda.so, compiled by this machine's nvcc for sm_90 (H100, H200), as `make cuda`
#    would with NVCC_ARCH=sm_90;
#  - lib/: every shared library the binaries load but glibc's own;
#  - any further binaries named on the command line (with their libraries).
# On the machine: tar xJf build/gpu-h/bundle.tar.xz -C DIR, then
#   LD_LIBRARY_PATH=DIR/lib SL_INFER_CUDA_LIB=DIR/libsl_infer_cuda.so DIR/speclab ... --device cuda
# Models travel beside it through tests/bench/gpu_pack.py (the tree and what is carried: 64 MiB).
set -eu
cd "$(dirname "$0")/../.."
O=build/gpu-h
S=build/gpu-stage
command -v nvcc > /dev/null || { echo "gpu_bundle.sh: needs nvcc (CUDA) to build libsl_infer_cuda.so" >&2; exit 2; }
rm -rf "$S"
mkdir -p "$S/lib" "$O"
make -s build/libspeclab.a build/speclab
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -O2 -march=x86-64-v3 -Isim -Ianalysis -Imodels -Imodels/train
 -Iplots -Inotebooks_export -Idata -Isim/cli -I/usr/include/hdf5/serial -I/usr/include/json-c"
LIBS="-lgsl -lgslcblas -lm -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -ljson-c -lpcre2-8 -ldeflate -lnettle
 -lgomp -lpthread -lm -ldl"
echo 'void openblas_set_num_threads(int n) { (void)n; }' > "$O/oblstub.c"
cc -O2 -c -o "$O/oblstub.o" "$O/oblstub.c"
# shellcheck disable=SC2086
cc -fopenmp -o "$S/speclab" build/sim/cli/*.o -Wl,--whole-archive build/libspeclab.a -Wl,--no-whole-archive \
  "$O/oblstub.o" $LIBS
# shellcheck disable=SC2086
cc $CFLAGS -o "$S/infer_gpu_check" tests/bench/infer_gpu_check.c build/libspeclab.a "$O/oblstub.o" $LIBS
nvcc -O3 -arch=sm_90 --fmad=false -x cu -Imodels -Xcompiler -fPIC,-fvisibility=hidden -shared \
  -o "$S/libsl_infer_cuda.so" models/sl_infer_gpu.c
for b in "$@"; do cp "$b" "$S/"; done
for b in "$S"/speclab "$S"/infer_gpu_check "$@"; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | while read -r l; do cp -L "$l" "$S/lib/"; done
tar cJf "$O/bundle.tar.xz" -C "$S" .
echo "$O/bundle.tar.xz: $(du -h "$O/bundle.tar.xz" | cut -f1) ($(ls "$S/lib" | wc -l) libraries)"
