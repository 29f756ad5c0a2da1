#!/bin/bash
# Run 7 (at c57f111: a thread per row): run 5 call A again after the host-side change (rows of a block standardised in
# parallel); on the shipped models. The bundle (build/gpu-h, carried) holds the
# binaries built on the Debian machine with their libraries, libsl_infer_cuda.so built there by
# nvcc -arch=sm_90, the shipped target packed by build/gpu-h/pack.py (too large for the trip raw)
# and the bigram draft xz'd. Outputs: $OUT/run7.tgz.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R/t1 $R/t0
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
SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t1 models/drafts/bigram.safetensors \
  models/family/draft-s-distilled.safetensors models/family/draft-xxs.safetensors models/drafts/lookup.safetensors 2>&1 | tee $R/c_family_t1.txt
TEMPERATURE=0 SPECLAB=$H/speclab bash tests/bench/infer_gpu_family.sh $R/t0 models/drafts/lookup.safetensors \
  models/family/draft-s-distilled.safetensors models/drafts/bigram.safetensors models/family/draft-xxs.safetensors 2>&1 | tee $R/c_family_t0.txt
tar czf $OUT/run7.tgz -C $R .
