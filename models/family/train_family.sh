#!/usr/bin/env bash
# train_family.sh: trains the shipped transformer family from models/family/recipe.tsv.
#
#   models/family/train_family.sh target               the target (stage "target" rows)
#   models/family/train_family.sh base    [BUDGET_S]   the data-only drafts, in parallel
#   models/family/train_family.sh small                the candidates for the smallest draft, in parallel
#   models/family/train_family.sh distill              the distilled draft (needs OUT/target)
#
# A row's `where` column is `cuda` (speclab --backend cuda, one GPU; rows of a stage share it and
# run in parallel) or a CPU thread count. BACKEND=cpu runs cuda rows on the CPU instead (same
# recipe; see models/README.md for the cost).
# Env: SPECLAB (binary, default build/speclab), BENCH (bench_train binary, for "auto" steps),
#      DATA (folder with mix.train.tok, mix.valid.tok; default data/corpus), OUT (default
#      models/family/out). Rows whose steps are "auto" get their steps from a throughput probe
#      run with the same thread layout: steps = 0.9 * BUDGET_S * tokens_per_s / 4096; the chosen
#      steps are written to OUT/steps.tsv so that a retrain can pin them in recipe.tsv.
# Each model is exported as f16 with the shipped tokenizer in its metadata; logs go to OUT/*.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
BENCH=${BENCH:-build/bench/bench_train}
DATA=${DATA:-data/corpus}
OUT=${OUT:-models/family/out}
RECIPE=${RECIPE:-models/family/recipe.tsv}
STAGE=${1:-base}
BUDGET=${2:-420}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=passive
B=16 T=256

rows() { grep -v '^#' "$RECIPE" | awk -v st="$1" '$2 == st'; }
# Where a row runs: "--backend cuda" or "--threads N" (N capped at this machine's cores).
place() {
  if [ "$1" = cuda ] && [ "${BACKEND:-cuda}" = cuda ]; then echo "--backend cuda"
  elif [ "$1" = cuda ]; then echo "--threads $(nproc)"
  else echo "--threads $(( $1 > $(nproc) ? $(nproc) : $1 ))"; fi
}
config() { printf '{"n_layer":%s,"n_head":%s,"d_model":%s,"d_ff":%s,"max_seq_len":256,"vocab_size":4096}' "$1" "$2" "$3" "$4"; }

if [ "$STAGE" = base ] || [ "$STAGE" = target ] || [ "$STAGE" = small ]; then
  # Throughput probe, all models at once with their thread counts (the layout of the real runs).
  : > "$OUT/probe.txt"
  while read -r name _ L H d ff lr seed thr steps from; do
    [ "$steps" = auto ] || continue
    ( OMP_NUM_THREADS=$thr "$BENCH" "$L" "$d" "$ff" "$H" $T $B 4096 3 | awk -v n="$name" '/training throughput/ {print n, $3}' >> "$OUT/probe.txt" ) &
  done < <(rows "$STAGE")
  wait
  cat "$OUT/probe.txt"
  touch "$OUT/steps.tsv"
  # Rows train in parallel with their recorded threads when the machine has the cores for all of
  # them; otherwise one after another on every core (the result does not depend on the count).
  ncpu=$(nproc)
  need=$(rows "$STAGE" | awk -v b="${BACKEND:-cuda}" '{s += ($9 == "cuda" ? (b == "cuda" ? 0 : 1000000) : $9)} END {print s + 0}')
  serial=$(( need > ncpu ? 1 : 0 ))
  while read -r name _ L H d ff lr seed thr steps from; do
    where=$(place "$thr")
    [ "$serial" = 1 ] && [ "$thr" != cuda ] && where="--threads $ncpu"
    if [ "$steps" = auto ]; then
      tps=$(awk -v n="$name" '$1 == n {print $2}' "$OUT/probe.txt")
      steps=$(awk -v t="$tps" -v b="$BUDGET" 'BEGIN { s = int(0.9 * b * t / 4096); print (s < 50 ? 50 : s) }')
    fi
    printf '%s\t%s\n' "$name" "$steps" >> "$OUT/steps.tsv"
    warm=$(( steps / 20 > 1 ? steps / 20 : 1 ))
    "$S" train --train "$DATA/mix.train.tok" --valid "$DATA/mix.valid.tok" --config "$(config "$L" "$H" "$d" "$ff")" \
      --steps "$steps" --batch $B --seq $T --lr "$lr" --warmup "$warm" --seed "$seed" $where \
      --checkpoint "$OUT/ck-$name" --eval-every $(( steps / 10 > 1 ? steps / 10 : 1 )) --log "$OUT/$name.csv" \
      --dtype f16 --tokenizer models/tokenizer.json --out "$OUT/$name.safetensors" > "$OUT/$name.stdout" 2>&1 &
    [ "$serial" = 1 ] && wait
  done < <(rows "$STAGE")
  wait
  cat "$OUT/steps.tsv"
elif [ "$STAGE" = distill ]; then
  read -r name _ L H d ff lr seed thr steps from < <(rows distill)
  where=$(place "$thr")
  teacher=$OUT/$from.safetensors
  # "=NAME": as many steps as NAME (its data-only twin) took in the base stage.
  case "$steps" in =*) steps=$(awk -v n="${steps#=}" '$1 == n {print $2}' "$OUT/steps.tsv") ;; esac
  "$S" distill --teacher "$OUT/$from.safetensors" --objective kl --train "$DATA/mix.train.tok" --valid "$DATA/mix.valid.tok" \
    --config "$(config "$L" "$H" "$d" "$ff")" --steps "$steps" --batch $B --seq $T --lr "$lr" --warmup $(( steps / 20 )) \
    --seed "$seed" $where --checkpoint "$OUT/ck-$name" --eval-every $(( steps / 10 > 1 ? steps / 10 : 1 )) --log "$OUT/$name.csv" \
    --dtype f32 --out "$OUT/$name.safetensors" > "$OUT/$name.stdout" 2>&1
  # The acceptance-rate objective (TV = 1 - beta) as a short fine-tune from the KL draft.
  read -r name _ L H d ff lr seed thr steps from < <(rows finetune)
  where=$(place "$thr")
  "$S" distill --teacher "$teacher" --objective tv --init "$OUT/$from.safetensors" \
    --train "$DATA/mix.train.tok" --valid "$DATA/mix.valid.tok" --steps "$steps" --batch $B --seq $T --lr "$lr" \
    --warmup $(( steps / 20 )) --seed "$seed" $where --checkpoint "$OUT/ck-$name" \
    --eval-every $(( steps / 10 > 1 ? steps / 10 : 1 )) --log "$OUT/$name.csv" --dtype f16 --out "$OUT/$name.safetensors" > "$OUT/$name.stdout" 2>&1
else
  echo "usage: train_family.sh target | base [BUDGET_S] | small | distill" >&2
  exit 2
fi
