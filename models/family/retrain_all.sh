#!/usr/bin/env bash
# retrain_all.sh: one command that rebuilds the whole shipped family from the corpora with the
# recorded seeds and steps (models/family/recipe.tsv): corpora, token files, the transformers
# (target, data-only drafts, distilled draft), n-gram and lookup drafts, evaluation. Writes into
# OUT (default models/family/out/) and models/drafts/; `models/family/install_family.sh OUT` then
# makes the result the shipped family.
# Rows whose `where` is cuda train on the GPU (models/family/train_gpu.sh; needs nvcc and a GPU) unless
# BACKEND=cpu, which runs every row on the CPU backend, one stage after another. The cost of each
# recipe on the 2-core machine is in its header and in models/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
make
bash data/fetch.sh
bash data/tokenize.sh
bash data/make_mix.sh
export OUT=${OUT:-models/family/out} RECIPE=${RECIPE:-models/family/recipe.tsv}
if [ "${BACKEND:-cuda}" = cuda ] && grep -v '^#' "$RECIPE" | awk '$9 == "cuda"' | grep -q .; then
  make cuda
  bash models/family/train_gpu.sh
else
  export BACKEND=cpu
  for stage in target base small distill; do bash models/family/train_family.sh "$stage"; done
fi
bash models/make_ngram_drafts.sh
FAMILY=$OUT bash models/family/eval_family.sh
