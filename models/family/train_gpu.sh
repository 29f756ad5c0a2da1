#!/usr/bin/env bash
# train_gpu.sh: the family of models/family/recipe.tsv on one GPU, in two phases:
#   models/family/train_gpu.sh a      the target, alone (processes sharing a GPU are time-sliced,
#                                     which slowed the target 6x beside eight others in session 4)
#   models/family/train_gpu.sh b      draft-l, draft-m, -s, -xs, -xxs and the distilled draft
#                                     together (small models alone leave the GPU mostly idle;
#                                     distillation needs OUT/target)
#   models/family/train_gpu.sh        both, one after the other
# Needs build/speclab and build/libsl_train_cuda.so (`make && make cuda`; or SPECLAB and
# SL_CUDA_LIB), data/corpus/mix.{train,valid}.tok (data/fetch.sh, tokenize.sh, make_mix.sh).
# Every run checkpoints at each tenth of its steps; rerunning a phase resumes where it stopped.
# Measured on an H100 (session 4): the target's shape alone trains at 75 000 tokens/s (8000 steps:
# about 7.5 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
export RECIPE=${RECIPE:-models/family/recipe.tsv} OUT=${OUT:-models/family/out-gpu}
export SPECLAB=${SPECLAB:-build/speclab} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
# together STAGE...: the train_family.sh stages at once; fails if any fails.
together() {
  local pids=() st rc=0 k=0
  for st in "$@"; do
    bash models/family/train_family.sh "$st" > "$OUT/stage-$st.txt" 2>&1 & pids+=($!)
  done
  for st in "$@"; do
    wait "${pids[$k]}" || { echo "stage $st failed: $OUT/stage-$st.txt" >&2; rc=1; }
    k=$((k + 1))
  done
  return $rc
}
phase() {
  case $1 in
    a) together target ;;
    b) together base small distill ;;
    *) echo "usage: train_gpu.sh [a|b]" >&2; exit 2 ;;
  esac
}
if [ $# -eq 0 ]; then phase a; phase b; else phase "$1"; fi
tail -n 3 "$OUT"/*.csv
