#!/bin/bash
# 745099a+ (work stealing in a forward pass's matmuls) against 37a14d8 on the lent machine's CPU:
# GPT-2-774M shape in f16 (dec_*: decode vs a STREAM-like pass, alternated) and a random model of
# the shipped target's shape in f16 (dec2_*: t(1), t(5)), old and new alternated, 16, 8 and 2 threads.
set -u
H=/tmp/h; rm -rf $H; mkdir -p $H build/dev
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib
lscpu | grep -E "Model name|^CPU\(s\)|L3" | cut -c1-120 | tee $OUT/cpu.txt
[ -f build/dev/g774_f16.safetensors ] || OMP_NUM_THREADS=16 $H/speclab model init --arch gpt2 \
  --config '{"vocab_size":50257,"n_layer":36,"n_head":20,"d_model":1280,"d_ff":5120,"max_seq_len":1024}' \
  --dtype f16 --seed 124 --out build/dev/g774_f16.safetensors || exit 1
[ -f build/dev/fam_f16.safetensors ] || OMP_NUM_THREADS=16 $H/speclab model init --arch gpt2 \
  --config '{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256}' \
  --dtype f16 --seed 7 --out build/dev/fam_f16.safetensors || exit 1
for th in 16 8 2; do
  for r in 1 2 3; do
    for v in old new; do
      echo -n "threads $th round $r $v: "; OMP_NUM_THREADS=$th build/gpu-h-y/dec_$v build/dev/g774_f16.safetensors 15
      echo -n "threads $th round $r $v: "; OMP_NUM_THREADS=$th build/gpu-h-y/dec2_$v build/dev/fam_f16.safetensors 300
    done
  done
done 2>&1 | tee $OUT/dec.txt
