#!/usr/bin/env bash
# distill_gain.sh [KL_MODEL]: the α that distillation buys (issue 5, item 4). For each draft of the
# recipe's distillation chain, the data-only twin (same shape, seed and total steps), the KL stage
# (KL_MODEL, default models/family/out-gpu/<stage>.safetensors; skipped if absent: it is not
# shipped) and the shipped distilled draft, `speclab measure` against the target on the first
# $PROMPTS prompts of each domain (default 96), $TOKENS tokens each (default 128), temperatures 1
# and 0, seed 1. The same seed makes the target generate the same text for every draft, so
# distill_gain.py compares them paired (per-prompt β differences, bootstrap CI over prompts).
# Writes models/family/distill_gain.csv (read by check_order.py) and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
. models/family/family_lib.sh
PROMPTS=${PROMPTS:-96} TOKENS=${TOKENS:-128}
recipe=$FAMILY/recipe.tsv
# the chain: finetune row (shipped), its init (KL stage), and the data-only twin of the same shape
read -r fin kl < <(awk '!/^#/ && NF && $2 == "finetune" {print $1, $11; exit}' "$recipe")
[ -n "${fin:-}" ] || { echo "distill_gain: no finetune row in $recipe" >&2; exit 2; }
shape=$(awk -v m="$fin" '$1 == m {print $3, $4, $5, $6}' "$recipe")
twin=$(awk -v s="$shape" '!/^#/ && NF && ($2 == "small" || $2 == "base") && ($3" "$4" "$5" "$6) == s {print $1; exit}' "$recipe")
[ -n "$twin" ] || { echo "distill_gain: no data-only twin of shape $shape in $recipe" >&2; exit 2; }
KL=${1:-models/family/out-gpu/$kl.safetensors}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
models="$twin=$FAMILY/$twin.safetensors"
[ -f "$KL" ] && models="$models $kl=$KL" || echo "distill_gain: $KL absent, KL stage skipped" >&2
models="$models $fin=$FAMILY/$fin.safetensors"
jobs=()
for d in prose code; do
  head -n "$PROMPTS" "data/prompts/$d.txt" > "$tmp/p-$d.txt"
  for t in 1 0; do
    for spec in $models; do
      name=${spec%%=*}
      OMP_NUM_THREADS=1 "$S" measure --target "$FAMILY/target.safetensors" --draft "${spec#*=}" --prompts "$tmp/p-$d.txt" \
        --tokens "$TOKENS" --temperature "$t" --seed 1 --dist none --out "$tmp/$name.$d.t$t.h5" > /dev/null &
      jobs+=($!)
      [ ${#jobs[@]} -lt "$(nproc)" ] || { wait "${jobs[0]}"; jobs=("${jobs[@]:1}"); }
    done
  done
done
for j in "${jobs[@]}"; do wait "$j"; done
/usr/bin/python3 models/family/distill_gain.py "$tmp" "$twin" "$models" > "$FAMILY/distill_gain.csv.tmp"
mv "$FAMILY/distill_gain.csv.tmp" "$FAMILY/distill_gain.csv"
/usr/bin/python3 models/family/distill_gain.py --table "$FAMILY/distill_gain.csv"
