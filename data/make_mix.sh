#!/usr/bin/env bash
# make_mix.sh: the family's training and validation token files: prose and code splits
# concatenated (every document already ends with <|endoftext|>), encoded with the shipped
# tokenizer: data/corpus/mix.{train,valid}.tok. Run after data/fetch.sh and make.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
for s in train valid; do
  cat "data/corpus/prose.$s.txt" "data/corpus/code.$s.txt" > "data/corpus/mix.$s.txt"
  "$S" tokenize encode --tokenizer models/tokenizer.json --in "data/corpus/mix.$s.txt" --out "data/corpus/mix.$s.tok"
done
