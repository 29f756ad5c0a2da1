#!/bin/bash
# Run 16, call B (right after call A, on the same machine: the target it unpacked into build/dev/
# is kept between calls): draft-m (8.6 MB) and draft-l (33 MB), the shipped drafts no earlier trip
# could carry beside the target, against the CPU engine (infer_gpu_check), then at T = 1 and T = 0
# through infer_gpu_family.sh (c, v(n), speedup over the GPU's autoregressive decoding, prediction).
set -u
H=/tmp/h; R=$H/out; rm -rf $H; mkdir -p $H $R
[ -f build/dev/target.safetensors ] || { echo "no target left from call A: the machine was not kept"; exit 3; }
tar xJf build/gpu-h-b/bundle.tar.xz -C $H || exit 1
for m in draft-m draft-l; do python3 tests/bench/gpu_pack.py unpack build/gpu-h-b/$m build/dev/$m.safetensors || exit 1; done
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
$H/infer_gpu_check --device cuda build/dev/draft-m.safetensors build/dev/draft-l.safetensors 2>&1 | tee $R/b_drafts.txt
for t in 1 0; do
  TEMPERATURE=$t TARGET=build/dev/target.safetensors SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t$t \
    build/dev/draft-m.safetensors build/dev/draft-l.safetensors 2>&1 | tee $R/c_family_t$t.txt
done
cp $R/*.txt $OUT/
tar czf $OUT/run16b.tgz -C $R .
