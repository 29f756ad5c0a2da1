#!/bin/bash
# Run 11 (at the commit after 87ee526: the sampler's sums over the vocabulary in four partial
# sums, zero blocks skipped by the draw): the family sweeps at T = 1 and T = 0 with the
# distributions on the device, two rounds, each draft run by this speclab and by the same binary
# linked with 87ee526's sl_dist.o (speclab_old: one-chain sums), alternated. Outputs: $OUT/run11.tgz
# (each sweep's run reports and summary.csv) and $OUT/c_family.txt.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
xz -dc build/gpu-h/bigram.safetensors.xz > models/drafts/bigram.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
for round in 1 2; do
  for temp in 0 1; do
    for d in models/drafts/lookup.safetensors models/drafts/bigram.safetensors models/family/draft-s-distilled.safetensors models/family/draft-xxs.safetensors; do
      for bin in speclab speclab_old; do
        echo "== round $round T=$temp $bin"
        TEMPERATURE=$temp SPECLAB=$H/$bin bash tests/bench/infer_gpu_family.sh $R/r${round}_t${temp}_$bin/$(basename $d .safetensors) $d 2>&1
      done
    done
  done
  tar czf $OUT/run11.tgz -C $R .
done | tee $R/c_family.txt
cp $R/c_family.txt $OUT/
tar czf $OUT/run11.tgz -C $R .
