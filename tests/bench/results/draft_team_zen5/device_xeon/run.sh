#!/bin/bash
# session 44 device trip: (a) the AVX-512 build's one-token prefetch distance, 16 KiB (first) / 8 KiB
# / 4 KiB alternated call by call, GPT-2-774M f16 (1.5 GB); (b) single-token decode with and without
# the context's team, 27fa927's sl_model.c (nested regions without a team) and the fixed one.
set -u
D=build/dev6
lscpu | grep -E "Model name|^CPU\(s\)|L3|avx512f" | cut -c1-120 | tee $OUT/cpu.txt
M=/tmp/g774_f16.safetensors
export MODEL=$M MB_LARGE=1
( time OMP_NUM_THREADS=16 R=1 $D/dec6 0 16384 0 ) > $OUT/gen.txt 2>&1
for T in 16 2 1; do
  R=40; [ $T = 1 ] && R=16; [ $T = 2 ] && R=24
  for rep in 1 2; do echo "# GPT-2-774M f16, $T thread(s), round $rep"; OMP_NUM_THREADS=$T R=$R $D/dec6 0 16384 0 0 8192 0 0 4096 0; done
done 2>&1 | tee $OUT/dec.txt
for T in 16 2; do for b in team_old team_new; do echo "# $b, GPT-2-774M f16"; OMP_NUM_THREADS=$T OMP_WAIT_POLICY=active R=20 $D/$b; done; done 2>&1 | tee $OUT/team.txt
