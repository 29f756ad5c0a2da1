#!/usr/bin/env bash
# retrain_all.sh: one command that rebuilds the whole shipped family from the corpora with the
# recorded seeds and steps (models/family/recipe.tsv): corpora, token files, target, data-only
# drafts, distilled draft, n-gram and lookup drafts, evaluation. Writes into models/family/out/ and
# models/drafts/ (copy the .safetensors from out/ over models/family/ to replace the shipped ones).
# Cost on the 2-core machine with both cores free: about 1 h 40 min (models/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
make
bash data/fetch.sh
bash data/tokenize.sh
bash data/make_mix.sh
export OUT=${OUT:-models/family/out}
bash models/family/train_family.sh target
bash models/family/train_family.sh base
bash models/family/train_family.sh distill
bash models/make_ngram_drafts.sh
bash models/family/eval_family.sh
