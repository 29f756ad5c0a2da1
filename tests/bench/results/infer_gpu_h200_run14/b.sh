#!/bin/bash
# Run 14: the small shipped drafts not in runs 12-13 (draft-s, draft-xs, unigram) and the
# bigram, `speclab run` sweeps at T = 1 and T = 0. Outputs: $OUT/run14b.tgz and the text log.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
{
  for temp in 1 0; do
    for d in models/family/draft-s.safetensors models/family/draft-xs.safetensors models/drafts/unigram.safetensors; do
      echo "== T=$temp"
      TEMPERATURE=$temp SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t$temp/$(basename $d .safetensors) $d 2>&1
    done
  done
} 2>&1 | tee $R/b_family.txt
cp $R/b_family.txt $OUT/
tar czf $OUT/run14b.tgz -C $R .
