#!/bin/bash
# Run 2: old (37a14d8), new (stealing in every call: SL_KERN_STEAL_MIN 0), thr (stealing only in calls of at least
# 4 units per thread: SL_KERN_STEAL_MIN 4), alternated; GPT-2-774M f16 (dec_*) and the shipped target's shape (dec2_*).
set -u
H=/tmp/h; rm -rf $H; mkdir -p $H build/dev
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib
[ -f build/dev/g774_f16.safetensors ] || OMP_NUM_THREADS=16 $H/speclab model init --arch gpt2 \
  --config '{"vocab_size":50257,"n_layer":36,"n_head":20,"d_model":1280,"d_ff":5120,"max_seq_len":1024}' \
  --dtype f16 --seed 124 --out build/dev/g774_f16.safetensors || exit 1
[ -f build/dev/fam_f16.safetensors ] || OMP_NUM_THREADS=16 $H/speclab model init --arch gpt2 \
  --config '{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256}' \
  --dtype f16 --seed 7 --out build/dev/fam_f16.safetensors || exit 1
for th in 16 8 4 2; do
  for r in 1 2; do
    for v in old new thr; do
      echo -n "threads $th round $r $v: "; OMP_NUM_THREADS=$th build/gpu-h-y/dec_$v build/dev/g774_f16.safetensors 15
      echo -n "threads $th round $r $v: "; OMP_NUM_THREADS=$th build/gpu-h-y/dec2_$v build/dev/fam_f16.safetensors 300
    done
  done
done 2>&1 | tee $OUT/dec2.txt
