#!/bin/bash
# Run 16, call D: the control of call C's rejection of bug-shared-uniform at K = 256000 (the exact
# rule at the same K, speculative only, same seed), and bug-lowprec-draft (not rejected up to
# K = 64000 in analysis/verify_controls.csv) at K = 256000.
set -u
H=/tmp/h; R=$H/out; rm -rf $H; mkdir -p $H $R build/dev
tar xJf build/gpu-h-a/bundle.tar.xz -C $H || exit 1
[ -f build/dev/target.safetensors ] || python3 tests/bench/gpu_pack.py unpack build/gpu-h-a/target build/dev/target.safetensors || exit 1
export LD_LIBRARY_PATH=$H/lib SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so
head -n 1 data/prompts/prose.txt > $R/one.txt
v() { # NAME DEVICE WORKERS K RULE [OPTION...]
  local name=$1 dev=$2 th=$3 k=$4 rule=$5; shift 5
  local t0; t0=$(date +%s%N)
  timeout ${LIMIT:-200} $H/speclab verify --device $dev --target build/dev/target.safetensors \
    --draft models/family/draft-s-distilled.safetensors --prompts $R/one.txt --samples $k --tokens 4 --gamma 3 --seed 1 \
    --threads $th --rule $rule "$@" --quiet --format json > $R/$name.json 2> $R/$name.err
  local rc=$?
  echo "$name: --device $dev --threads $th --samples $k --rule $rule $*: exit $rc, wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a $R/log.txt
  cp $R/log.txt $OUT/
}
LIMIT=240 v exact_cuda_256k_w8 cuda 8 256000 exact --no-autoregressive
LIMIT=240 v bug_lowprec_cuda_256k_w8 cuda 8 256000 bug-lowprec-draft --no-autoregressive
tar czf $OUT/run16d.tgz -C $R .
