# family_lib.sh (sourced by eval_family.sh and samples.sh): the shipped transformers, in the
# recipe's order: every row whose stage is not the intermediate "distill" of RECIPE (default
# models/family/recipe.tsv); FAMILY is the folder holding NAME.safetensors (default models/family).
RECIPE=${RECIPE:-models/family/recipe.tsv}
FAMILY=${FAMILY:-models/family}
family_models() { grep -v '^#' "$RECIPE" | awk 'NF && $2 != "distill" {print $1}'; }
