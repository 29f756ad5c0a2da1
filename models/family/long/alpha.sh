#!/usr/bin/env bash
# alpha.sh: the alpha that the longer distillation buys (models/family/long/README.md). For the
# shipped distilled draft (recipe.tsv's chain), the first stage of the longer one
# (long/draft-s-long-tv1) and the shipped longer draft (draft-s-long): `speclab measure` against
# the target on the first $PROMPTS prompts of each domain (default 96), $TOKENS tokens each
# (default 128), temperatures 1 and 0, seed 1, so that the target generates the same text for
# every draft and models/family/distill_gain.py compares them paired with draft-s-distilled
# (per-prompt beta differences, bootstrap CI over prompts). Writes models/family/long/alpha.csv
# and prints a table. About 2 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=${SPECLAB:-build/speclab}
F=models/family
PROMPTS=${PROMPTS:-96} TOKENS=${TOKENS:-128}
models="draft-s-distilled=$F/draft-s-distilled.safetensors draft-s-long-tv1=$F/long/draft-s-long-tv1.safetensors draft-s-long=$F/draft-s-long.safetensors"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
jobs=()
for d in prose code; do
  head -n "$PROMPTS" "data/prompts/$d.txt" > "$tmp/p-$d.txt"
  for t in 1 0; do
    for spec in $models; do
      OMP_NUM_THREADS=1 "$S" measure --target $F/target.safetensors --draft "${spec#*=}" --prompts "$tmp/p-$d.txt" \
        --tokens "$TOKENS" --temperature "$t" --seed 1 --dist none --out "$tmp/${spec%%=*}.$d.t$t.h5" > /dev/null &
      jobs+=($!)
      [ ${#jobs[@]} -lt "$(nproc)" ] || { wait "${jobs[0]}"; jobs=("${jobs[@]:1}"); }
    done
  done
done
for j in "${jobs[@]}"; do wait "$j"; done
/usr/bin/python3 $F/distill_gain.py "$tmp" draft-s-distilled "$models" > $F/long/alpha.csv.tmp
mv $F/long/alpha.csv.tmp $F/long/alpha.csv
/usr/bin/python3 $F/distill_gain.py --table $F/long/alpha.csv
