#!/bin/bash
# Run 15 (at the commit after 706e05b: the pair product's f32 branch removed; call B after f32
# products went back to a row per warp, run 15 A having shown pairs slower there): the fixtures and
# the shipped target through infer_gpu_check once more (rows in pairs bit for bit against a row
# per warp, the device's distributions against the host's), and prompt lookup at T = 0 once.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-h/bundle.tar.xz -C $H || exit 1
python3 build/gpu-h/unpack.py build/gpu-h/target models/family/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
$H/infer_gpu_check --device cuda 2>&1 | tee $R/a_check_fixtures.txt
$H/infer_gpu_check --device cuda models/family/target.safetensors 2>&1 | tee $R/b_target.txt
cp $R/*.txt $OUT/
TEMPERATURE=0 SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t0/lookup models/drafts/lookup.safetensors 2>&1 | tee $R/c_family.txt
cp $R/c_family.txt $OUT/
tar czf $OUT/run15.tgz -C $R .
