#!/bin/bash
# Run 12 (products from 2 tokens two rows a warp; the lookup draft's faster step): the shipped
# target and distilled draft through infer_gpu_check (rows in pairs against a row per warp bit
# for bit; decode and t(n) both ways), then the family sweeps at T = 0 and T = 1 with pairs (the
# default) and without (SL_INFER_MV_PAIR_FROM=1000), alternated per draft, prompt lookup at T = 0
# twice. Outputs: $OUT/run12.tgz (each sweep's run report and summary.csv) and the text logs.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
xz -dc build/gpu-h/bigram.safetensors.xz > models/drafts/bigram.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
T=models/family/target.safetensors
$H/infer_gpu_check --device cuda $T models/family/draft-s-distilled.safetensors 2>&1 | tee $R/b_target.txt
cp $R/*.txt $OUT/
sweep() { # temp round draft
  for pairs in on off; do
    if [ $pairs = off ]; then export SL_INFER_MV_PAIR_FROM=1000; else unset SL_INFER_MV_PAIR_FROM; fi
    echo "== round $2 T=$1 pairs $pairs"
    TEMPERATURE=$1 SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/r$2_t$1_pairs_$pairs/$(basename $3 .safetensors) $3 2>&1
  done
  unset SL_INFER_MV_PAIR_FROM
}
{
  sweep 0 1 models/drafts/lookup.safetensors
  for d in models/drafts/bigram.safetensors models/family/draft-s-distilled.safetensors models/family/draft-xxs.safetensors; do sweep 0 1 $d; done
  for d in models/drafts/lookup.safetensors models/drafts/bigram.safetensors models/family/draft-s-distilled.safetensors models/family/draft-xxs.safetensors; do sweep 1 1 $d; done
  sweep 0 2 models/drafts/lookup.safetensors
} 2>&1 | tee $R/c_family.txt
cp $R/c_family.txt $OUT/
tar czf $OUT/run12.tgz -C $R .
