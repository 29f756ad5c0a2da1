#!/usr/bin/env bash
# bundle.sh: what the two device stages carry, in build/gpu-t/ (git-ignored): a speclab with only
# `train` and `distill` (GSL, json-c and the rest linked statically, glibc and libgomp shared, so it
# runs on the device machine's newer glibc; its trainer loads the CUDA backend that the stage
# compiles there with nvcc), the family's token files compressed with xz, and stage 2's init.
# The tracked tree is larger than one trip (64 MiB), so for the call the files other than
# models/train/ and models/family/target.safetensors were taken out of the index and listed in
# .git/info/exclude, and put back after (models/family/long/README.md).
# Needs `make`, data/fetch.sh and data/make_mix.sh first.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=build/gpu-t
mkdir -p $O/mini/lib
make -s build/libspeclab.a build/speclab
echo 'void openblas_set_num_threads(int n) { (void)n; }' > $O/oblstub.c
cc -O2 -c -o $O/oblstub.o $O/oblstub.c
cc -fopenmp -o $O/mini/speclab build/sim/cli/main.o build/sim/cli/cmd_distill.o build/sim/cli/cmd_train.o \
  build/sim/cli/sl_cli.o build/libspeclab.a $O/oblstub.o \
  -Wl,-Bstatic -lgsl -lgslcblas -ljson-c -lpcre2-8 -ldeflate -lnettle -Wl,-Bdynamic -lm -ldl -lpthread
cp -L "$(ldd $O/mini/speclab | awk '/libgomp/ {print $3}')" $O/mini/lib/
tar cJf $O/mini.tar.xz -C $O/mini .
xz -9 -T2 -c data/corpus/mix.train.tok > $O/mix.train.tok.xz
xz -9 -c data/corpus/mix.valid.tok > $O/mix.valid.tok.xz
cp models/family/long/draft-s-long-tv1.safetensors $O/init.safetensors
cp models/family/long/device_stage1.sh models/family/long/device_stage2.sh $O/
ls -l $O
