#!/bin/bash
# one-token prefetch distance (16-bit weights) on the lent machine's CPU: AVX-512 build of the kernel
set -u
lscpu | grep -E "Model name|^CPU\(s\)|L3|avx512f" | cut -c1-120 | tee $OUT/cpu.txt
M=/tmp/g774_f16.safetensors
export MODEL=$M MB_LARGE=1
( time OMP_NUM_THREADS=16 R=1 build/dev5/dec5 0 16384 0 ) > $OUT/gen.txt 2>&1
for T in 16 2 1; do
  R=40; [ $T = 1 ] && R=16; [ $T = 2 ] && R=24
  for rep in 1 2; do echo "# GPT-2-774M f16, $T thread(s), round $rep"; OMP_NUM_THREADS=$T R=$R build/dev5/dec5 0 16384 0 0 1024 0 0 4096 0; done
done 2>&1 | tee $OUT/dec.txt
