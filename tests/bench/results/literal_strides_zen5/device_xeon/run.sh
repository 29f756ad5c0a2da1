#!/bin/bash
# session 45 device trip: the AVX-512 build's one-token f32 prefetch distance, 16 KiB against 8 KiB
# (and 4 KiB), alternated call by call, a GPT-2-medium-shaped f32 model (1.4 GB, written on the device).
set -u
D=build/dev7
lscpu | grep -E "Model name|^CPU\(s\)|L3|avx512f" | cut -c1-120 > $OUT/cpu.txt
M=/tmp/g355_f32.safetensors
( time OMP_NUM_THREADS=16 $D/pdd $M 2 8192 ) > $OUT/gen.txt 2>&1
for T in 16 2 1; do
  R=60; [ $T = 1 ] && R=16; [ $T = 2 ] && R=30
  for rep in 1 2; do echo "# GPT-2-medium f32, $T thread(s), round $rep"; OMP_NUM_THREADS=$T OMP_WAIT_POLICY=active $D/pdd $M $R 8192 4096; done
done 2>&1 | tee $OUT/dec.txt
