#!/usr/bin/env bash
# tokenize.sh: encodes every corpus split with a tokenizer into token files for the trainer:
# data/corpus/{prose,code}.{train,valid,test}.tok (models/TOKFILE.md). Run after data/fetch.sh
# and `make`. Usage: bash data/tokenize.sh [TOKENIZER]   (default models/tokenizer.json)
set -euo pipefail
cd "$(dirname "$0")/.."
TOK=${1:-models/tokenizer.json}
S=${SPECLAB:-build/speclab}
for d in prose code; do
  for s in train valid test; do
    "$S" tokenize encode --tokenizer "$TOK" --in "data/corpus/$d.$s.txt" --out "data/corpus/$d.$s.tok"
  done
done
