#!/usr/bin/env bash
# make_ngram_drafts.sh: the family's drafts that are not transformers, from the training splits
# (models/README.md, "Drafts that are not transformers"), and their validation bits per byte.
#
#   models/make_ngram_drafts.sh [OUT]      (default OUT = models/drafts; run after data/fetch.sh and make)
#
# Writes OUT/unigram.safetensors (add-1), OUT/bigram.safetensors (interpolated Kneser-Ney, Ney's
# discount), OUT/lookup.safetensors (prompt lookup, N = 3, eps = 0.3, unigram fallback) and
# OUT/eval.csv. Counting is exact and uses no random numbers: the same corpus gives the same bytes.
# Cost on the 2-core machine: under 1 s to build, a few seconds to evaluate.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
OUT=${1:-models/drafts}
C=data/corpus
mkdir -p "$OUT"
TRAIN=("$C/prose.train.tok" "$C/code.train.tok")
"$S" model ngram --train "${TRAIN[@]}" --order 1 --tokenizer models/tokenizer.json --force --out "$OUT/unigram.safetensors"
"$S" model ngram --train "${TRAIN[@]}" --order 2 --smoothing kn --tokenizer models/tokenizer.json --force --out "$OUT/bigram.safetensors"
"$S" model lookup --n 3 --epsilon 0.3 --fallback "$OUT/unigram.safetensors" --force --out "$OUT/lookup.safetensors"
: > "$OUT/eval.csv"
for m in unigram bigram lookup; do
  for d in prose code; do
    "$S" eval --model "$OUT/$m.safetensors" --tokens "$C/$d.valid.tok" --text "$C/$d.valid.txt" --format csv |
      { [ -s "$OUT/eval.csv" ] && tail -n +2 || cat; } >> "$OUT/eval.csv"
  done
done
cat "$OUT/eval.csv"
