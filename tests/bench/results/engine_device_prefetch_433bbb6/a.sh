#!/bin/bash
# (Session 45: dec.c now includes tests/bench/stream_pass.h instead of its copy of the same pass; add -Itests/bench.)
# Result: the change read 72-74% of the pass on one thread against 94-95% (decode 152-161 ms against 126), 67-81%
# against 82-88% on 16 threads (dec.txt); it was reverted. The harness: dec.c here (built against libspeclab.a with
# each kernel; /tmp/kb/devdec.sh of that session linked it with GSL's CBLAS and the stub of tests/bench/gpu_bundle.sh).
# 433bbb6 (one-token packed passes over 16-bit weights without software prefetch in the AVX-512
# build) on the lent machine's CPU, against its parent: the harness dec.c here (15 pairs of a
# STREAM-like pass over a buffer the size of the weights and one single-token decode, then one
# decode more), GPT-2-774M shape in f16 (1.5 GB: larger than the CPU's L3), built twice with the
# two kernels (devdec_old: 433bbb6^, devdec_new: 433bbb6), alternated, 16 threads and 1.
set -u
H=/tmp/h; rm -rf $H; mkdir -p $H build/dev
tar xJf build/gpu-h-x/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib
lscpu | grep -E "Model name|^CPU\(s\)|L3|Flags" | cut -c1-160 | tee $OUT/cpu.txt
[ -f build/dev/g774_f16.safetensors ] || OMP_NUM_THREADS=16 $H/speclab model init --arch gpt2 \
  --config '{"vocab_size":50257,"n_layer":36,"n_head":20,"d_model":1280,"d_ff":5120,"max_seq_len":1024}' \
  --dtype f16 --seed 124 --out build/dev/g774_f16.safetensors || exit 1
for th in 16 1; do
  for r in 1 2 3; do
    for v in old new; do
      echo -n "threads $th round $r $v: "
      OMP_NUM_THREADS=$th build/gpu-h-x/devdec_$v build/dev/g774_f16.safetensors $([ $th = 1 ] && echo 5 || echo 15)
    done
  done
done 2>&1 | tee $OUT/dec.txt
