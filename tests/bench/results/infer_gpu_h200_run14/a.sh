#!/bin/bash
# Run 14 (at 47ae516's backend), call A: draft-m, which fits in the trip to the device with the
# target only without the other large drafts: `speclab run` sweeps at T = 1 and T = 0, as run 12's.
# Call B (b.sh) the remaining small drafts. Outputs: $OUT/run14a.tgz and the text log.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
{
  for temp in 1 0; do
    echo "== T=$temp"
    TEMPERATURE=$temp SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t$temp/draft-m models/family/draft-m.safetensors 2>&1
  done
} 2>&1 | tee $R/a_family.txt
cp $R/a_family.txt $OUT/
tar czf $OUT/run14a.tgz -C $R .
