#!/usr/bin/env bash
# train_gpu.sh: the family of models/family/recipe-gpu.tsv on one GPU, in two phases that each keep
# the GPU busy (small models alone leave it mostly idle, so they share it with a large one):
#   models/family/train_gpu.sh a      the target, and meanwhile draft-m, -s, -xs, -xxs
#   models/family/train_gpu.sh b      draft-l, and meanwhile the distilled draft (needs OUT/target)
#   models/family/train_gpu.sh        both, one after the other
# Needs build/speclab and build/libsl_train_cuda.so (`make && make cuda`; or SPECLAB and
# SL_CUDA_LIB), data/corpus/mix.{train,valid}.tok (data/fetch.sh, tokenize.sh, make_mix.sh).
# Every run checkpoints at each tenth of its steps; rerunning a phase resumes where it stopped.
# Measured on an H100 (session 4): the target's shape alone trains at 75 000 tokens/s (8000 steps:
# about 7.5 min); with the four small drafts beside it, about 4 min more per phase.
set -euo pipefail
cd "$(dirname "$0")/../.."
export RECIPE=${RECIPE:-models/family/recipe-gpu.tsv} OUT=${OUT:-models/family/out-gpu}
export SPECLAB=${SPECLAB:-build/speclab} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
# together STAGE STAGE: both train_family.sh stages at once; fails if either fails.
together() {
  bash models/family/train_family.sh "$1" > "$OUT/stage-$1.txt" 2>&1 & local p1=$!
  bash models/family/train_family.sh "$2" > "$OUT/stage-$2.txt" 2>&1 & local p2=$!
  local rc=0
  wait $p1 || { echo "stage $1 failed: $OUT/stage-$1.txt" >&2; rc=1; }
  wait $p2 || { echo "stage $2 failed: $OUT/stage-$2.txt" >&2; rc=1; }
  return $rc
}
phase() {
  case $1 in
    a) together target small ;;
    b) together base distill ;;
    *) echo "usage: train_gpu.sh [a|b]" >&2; exit 2 ;;
  esac
}
if [ $# -eq 0 ]; then phase a; phase b; else phase "$1"; fi
tail -n 3 "$OUT"/*.csv
