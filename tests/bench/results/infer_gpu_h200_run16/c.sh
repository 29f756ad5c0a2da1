#!/bin/bash
# Run 16, call C: `speclab verify --target --draft` with the models on the GPU (the shipped target
# and draft-s-distilled, prompt line 1 of data/prompts/prose.txt, k = 4 tokens, gamma 3, seed 1):
# the exact rule at verify's default K = 4000 with 1 and 4 workers (same samples?), the same on
# the CPU engine (how many samples differ from the GPU's), a gross bug at K = 4000, then the
# sizes the CPU could not reach in minutes: the exact rule at K = 64000 and bug-shared-uniform
# (not rejected up to K = 64000 in analysis/verify_controls.csv) at K = 256000, speculative only.
set -u
H=/tmp/h; R=$H/out; rm -rf $H; mkdir -p $H $R build/dev
tar xJf build/gpu-h-a/bundle.tar.xz -C $H || exit 1
python3 tests/bench/gpu_pack.py unpack build/gpu-h-a/target build/dev/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so
head -n 1 data/prompts/prose.txt > $R/one.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/a_device.txt
v() { # NAME DEVICE WORKERS K RULE [OPTION...]
  local name=$1 dev=$2 th=$3 k=$4 rule=$5; shift 5
  local t0; t0=$(date +%s%N)
  timeout ${LIMIT:-200} $H/speclab verify --device $dev --target build/dev/target.safetensors \
    --draft models/family/draft-s-distilled.safetensors --prompts $R/one.txt --samples $k --tokens 4 --gamma 3 --seed 1 \
    --threads $th --rule $rule "$@" --samples-out $R/$name.samples --quiet --format json > $R/$name.json 2> $R/$name.err
  local rc=$?
  echo "$name: --device $dev --threads $th --samples $k --rule $rule $*: exit $rc, wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a $R/log.txt
  cp $R/log.txt $OUT/
}
v exact_cuda_w1 cuda 1 4000 exact
v exact_cuda_w4 cuda 4 4000 exact
cmp -s $R/exact_cuda_w1.samples $R/exact_cuda_w4.samples && echo "exact, 1 and 4 workers on cuda: the same samples, byte for byte" | tee -a $R/log.txt \
  || echo "exact, 1 and 4 workers on cuda: samples DIFFER" | tee -a $R/log.txt
v exact_cpu_w16 cpu 16 4000 exact
python3 - $R/exact_cuda_w1.samples $R/exact_cpu_w16.samples <<'PY' | tee -a $R/log.txt
import sys
a, b = (open(f).read().splitlines() for f in sys.argv[1:3])
d = sum(x != y for x, y in zip(a, b))
print(f"cuda against cpu, exact rule, K = 4000: {d} of {len(a)} sample lines differ (logits within ~2e-6 of each other; "
      f"a draw falls the other way only where a uniform lands that close to a boundary)")
PY
v bug_resample_cuda_w8 cuda 8 4000 bug-resample-from-p
LIMIT=150 v exact_cuda_64k_w8 cuda 8 64000 exact
LIMIT=240 v bug_shared_cuda_256k_w8 cuda 8 256000 bug-shared-uniform --no-autoregressive
rm -f $R/*.samples
cp $R/log.txt $R/a_device.txt $OUT/
tar czf $OUT/run16c.tgz -C $R .
