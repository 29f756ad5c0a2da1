#!/usr/bin/env bash
# Speculative steps per second: C (build/bench/bench_mc) against numpy (tests/bench/mc_numpy.py),
# same experiment (Zipf pair, gamma = 4), single thread, side by side in this run; prints the
# ratio (target >= 10 at every V). For each V the two alternate three times and the best run of
# each counts, so that load from other processes skews them alike. numpy runs with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (in this command only): some machines set them and
# they slow numpy down.
set -eu
cd "$(dirname "$0")/../.."
B=${BUILD:-build}/bench/bench_mc
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
NP() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tests/bench/mc_numpy.py "$@"; }
NP --info
# c_steps_per_s: the fused loop `speclab mc` runs; c_reference: every iteration through
# sl_spec_draft + sl_spec_verify (what `speclab verify` runs).
printf '%8s %14s %14s %16s %8s %10s %10s %10s %10s\n' V c_steps_per_s c_reference numpy_steps_per_s ratio ratio_ref \
  c_tok/it np_tok/it theory
status=0
for V in 256 4096 50257; do
  best_c=0 best_ref=0 best_np=0 cm= nm= ct=
  for rep in 1 2 3; do
    IFS=$'\t' read -r _ _ cst cm ct cref < <("$B" --tsv --vocab "$V" 2000000)
    IFS=$'\t' read -r _ _ nst nm _ < <(NP --tsv --vocab "$V" 1000000)
    best_c=$(awk -v a="$best_c" -v b="$cst" 'BEGIN { print (b > a ? b : a) }')
    best_ref=$(awk -v a="$best_ref" -v b="$cref" 'BEGIN { print (b > a ? b : a) }')
    best_np=$(awk -v a="$best_np" -v b="$nst" 'BEGIN { print (b > a ? b : a) }')
  done
  ratio=$(awk -v a="$best_c" -v b="$best_np" 'BEGIN { printf "%.1f", a / b }')
  ratio_ref=$(awk -v a="$best_ref" -v b="$best_np" 'BEGIN { printf "%.1f", a / b }')
  printf '%8s %14.0f %14.0f %16.0f %8s %10s %10.4f %10.4f %10.4f\n' "$V" "$best_c" "$best_ref" "$best_np" "$ratio" \
    "$ratio_ref" "$cm" "$nm" "$ct"
  awk -v r="$ratio" 'BEGIN { exit !(r >= 10) }' || { echo "  below the 10x target at V=$V"; status=1; }
done
exit $status
