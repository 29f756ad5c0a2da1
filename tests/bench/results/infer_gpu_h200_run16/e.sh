#!/bin/bash
# Run 16, call E: verify's throughput on the GPU with 16 workers (the exact rule at K = 64000, as
# call C did with 8), then bug-lowprec-draft (not rejected at K = 256000 in call D) at K = 1024000,
# speculative set only, with the exact rule at the same K and seed as its control.
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
  tar czf $OUT/run16e.tgz -C $R .
}
LIMIT=100 v exact_cuda_64k_w16 cuda 16 64000 exact
LIMIT=250 v bug_lowprec_cuda_1m_w16 cuda 16 1024000 bug-lowprec-draft --no-autoregressive
[ -n "$(grep 'bug_lowprec_cuda_1m_w16.*exit 1' $R/log.txt)" ] && LIMIT=250 v exact_cuda_1m_w16 cuda 16 1024000 exact --no-autoregressive
exit 0
