#!/bin/bash
# Device call F (round 4): norms from registers against aecbae1, alternated, on a random model of
# the target's shape; the fixtures' correctness; the per-kernel profile.
set -u
H=/tmp/h; mkdir -p $H
tar xJf build/gpu-h/libs.tar.xz -C $H && tar xzf build/gpu-h/bin.tar.gz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/f_device.txt
$H/infer_gpu_check --device cuda 2>&1 | grep -v "graphs\\|plain" | tee $OUT/f_check_fixtures.txt
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null
for r in 1 2; do
  for lib in libsl_infer_cuda_aecbae1.so libsl_infer_cuda.so; do
    echo "== $lib (round $r)"; SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda /tmp/t.st 2>&1
  done
done | tee $OUT/f_ab_target_shape.txt
SL_INFER_PROFILE=1 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so $H/speclab generate --autoregressive --target /tmp/t.st \
  --prompt-ids 1,2,3,4,5,6,7,8 --tokens 120 --device cuda 2>&1 >/dev/null | tee $OUT/f_profile.txt
