#!/bin/bash
# Run 10 (at 87ee526: the sampler's distributions on the device): the fixtures and the shipped
# target through infer_gpu_check (which now also checks the device's distributions against the
# host's of the same logits and times the sampler's decode and t(n) with them on the device and on
# the host, SL_INFER_DIST=host), the PyTorch anchor alternated, then the family sweeps at T = 1 and
# T = 0 with the distributions on the device (the default) and on the host, alternated per draft.
# The bundle (build/gpu-h, carried) as in run 7. Outputs: under $OUT.
set -u
H=/tmp/h; R=$OUT; mkdir -p $H
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
xz -dc build/gpu-h/bigram.safetensors.xz > models/drafts/bigram.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
$H/infer_gpu_check --device cuda 2>&1 | tee $R/a_check_fixtures.txt
T=models/family/target.safetensors
for r in 1 2; do
  echo "== round $r"
  $H/infer_gpu_check --device cuda $T models/family/draft-s-distilled.safetensors 2>&1
  python3 tests/bench/torch_anchor.py $T 2>&1
done | tee $R/b_target_vs_anchor.txt
for temp in 1 0; do
  for d in models/drafts/bigram.safetensors models/family/draft-s-distilled.safetensors models/drafts/lookup.safetensors models/family/draft-xxs.safetensors; do
    for where in device host; do
      if [ $where = host ]; then export SL_INFER_DIST=host; else unset SL_INFER_DIST; fi
      TEMPERATURE=$temp SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t${temp}_$where/$(basename $d .safetensors) $d 2>&1
    done
  done
done | tee $R/c_family.txt
unset SL_INFER_DIST

