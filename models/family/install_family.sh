#!/usr/bin/env bash
# install_family.sh SRC [RECIPE]: makes the models trained from RECIPE (default
# models/family/recipe.tsv) into SRC (train_gpu.sh's OUT, e.g. models/family/out-gpu) the shipped
# family: checks that every row's model and log exist first (nothing is touched otherwise), removes
# the shipped transformers that the recipe does not name, copies NAME.safetensors and NAME.csv
# (training log) into models/family/, makes RECIPE models/family/recipe.tsv (the old one is kept as
# recipe-previous.tsv), then evaluates (eval_family.sh), samples (samples.sh), measures the α that
# distillation gained (distill_gain.sh, with the unshipped KL stage from SRC) and checks the quality
# order (check_order.py; its exit status is this script's).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${1:?usage: install_family.sh SRC [RECIPE]}
NEW=${2:-models/family/recipe.tsv}
names=$(grep -v '^#' "$NEW" | awk 'NF {print $1}')
for n in $names; do
  for f in "$SRC/$n.safetensors" "$SRC/$n.csv"; do [ -f "$f" ] || { echo "install_family: missing $f" >&2; exit 2; }; done
done
keep=" $(grep -v '^#' "$NEW" | awk 'NF && $2 != "distill" {printf "%s ", $1}')"
# draft-s-long is not a recipe row: it comes from the longer distillation of models/family/long/.
keep="$keep draft-s-long "
for f in models/family/*.safetensors; do
  n=$(basename "$f" .safetensors)
  case "$keep" in *" $n "*) ;; *) git rm -q --ignore-unmatch "$f" "models/family/$n.csv"; rm -f "$f" "models/family/$n.csv" ;; esac
done
for n in $names; do
  cp "$SRC/$n.csv" models/family/
  case "$keep" in *" $n "*) cp "$SRC/$n.safetensors" models/family/ ;; esac
done
[ "$NEW" -ef models/family/recipe.tsv ] || { cp models/family/recipe.tsv models/family/recipe-previous.tsv; cp "$NEW" models/family/recipe.tsv; }
bash models/family/eval_family.sh
bash models/family/samples.sh
bash models/family/distill_gain.sh "$SRC/$(awk '!/^#/ && NF && $2 == "finetune" {print $11; exit}' models/family/recipe.tsv).safetensors"
/usr/bin/python3 models/family/check_order.py models/family/eval.csv models/family/recipe.tsv
