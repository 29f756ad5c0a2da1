#!/bin/bash
# Run 13 (at 47ae516's backend: rows in pairs, distributions on the device): the fixtures through
# infer_gpu_check (pairs bit for bit on gpt2/llama f32/f16), make bench's GPU item
# (tests/bench/gpu_anchor.sh: speclab against the PyTorch anchor, alternated twice, its TARGET
# line), then prompt lookup at T = 0 and the bigram at T = 1 again, rows in pairs and a row per
# warp alternated, rounds 3 and 4 after run 12's. Outputs: $OUT/run13.tgz and the text logs.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
xz -dc build/gpu-h/bigram.safetensors.xz > models/drafts/bigram.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
$H/infer_gpu_check --device cuda 2>&1 | tee $R/a_check_fixtures.txt
mkdir -p build/bench && cp $H/infer_gpu_check build/bench/
bash tests/bench/gpu_anchor.sh 2>&1 | tee $R/b_gpu_anchor.txt
cp $R/*.txt $OUT/
{
  for round in 3 4; do
    for pairs in on off; do
      if [ $pairs = off ]; then export SL_INFER_MV_PAIR_FROM=1000; else unset SL_INFER_MV_PAIR_FROM; fi
      echo "== round $round T=0 pairs $pairs"
      TEMPERATURE=0 SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/r${round}_t0_pairs_$pairs/lookup models/drafts/lookup.safetensors 2>&1
      echo "== round $round T=1 pairs $pairs"
      TEMPERATURE=1 SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/r${round}_t1_pairs_$pairs/bigram models/drafts/bigram.safetensors 2>&1
    done
    unset SL_INFER_MV_PAIR_FROM
  done
} 2>&1 | tee $R/c_family.txt
cp $R/c_family.txt $OUT/
tar czf $OUT/run13.tgz -C $R .
