#!/bin/bash
# Run 16, call A (tests/bench/gpu_bundle.sh and gpu_pack.py as committed with it): the shipped
# target alone (its packed halves and the bundle fill one trip), unpacked into build/dev/, which
# the machine keeps for call B; its logits against the CPU engine and its speed (infer_gpu_check).
set -u
H=/tmp/h; R=$H/out; rm -rf $H; mkdir -p $H $R build/dev
tar xJf build/gpu-h-a/bundle.tar.xz -C $H || exit 1
python3 tests/bench/gpu_pack.py unpack build/gpu-h-a/target build/dev/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
$H/infer_gpu_check --device cuda build/dev/target.safetensors 2>&1 | tee $R/b_target.txt
cp $R/*.txt $OUT/
