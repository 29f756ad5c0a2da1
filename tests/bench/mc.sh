#!/usr/bin/env bash
# Speculative steps per second: C (build/bench/bench_mc) against numpy (tests/bench/mc_numpy.py),
# same experiment, single thread, side by side in this run; prints the ratio (target >= 10 at
# every V). numpy runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (in this command only):
# some machines set them and they slow numpy down.
set -eu
cd "$(dirname "$0")/../.."
B=${BUILD:-build}/bench/bench_mc
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tests/bench/mc_numpy.py --info
c=$("$B" --tsv 2000000)
np=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tests/bench/mc_numpy.py --tsv 1000000)
# c_steps_per_s: the fused loop `speclab mc` runs; c_reference: every iteration through
# sl_spec_draft + sl_spec_verify (what `speclab verify` runs); both single thread.
printf '%8s %14s %14s %16s %8s %10s %10s %10s %10s\n' V c_steps_per_s c_reference numpy_steps_per_s ratio ratio_ref \
  c_tok/it np_tok/it theory
status=0
while IFS=$'\t' read -r V cs cst cm ct cref && IFS=$'\t' read -r V2 ns nst nm nt <&3; do
  ratio=$(awk -v a="$cst" -v b="$nst" 'BEGIN { printf "%.1f", a / b }')
  ratio_ref=$(awk -v a="$cref" -v b="$nst" 'BEGIN { printf "%.1f", a / b }')
  printf '%8s %14.0f %14.0f %16.0f %8s %10s %10.4f %10.4f %10.4f\n' "$V" "$cst" "$cref" "$nst" "$ratio" "$ratio_ref" "$cm" "$nm" "$ct"
  awk -v r="$ratio" 'BEGIN { exit !(r >= 10) }' || { echo "  below the 10x target at V=$V"; status=1; }
done <<<"$c" 3<<<"$np"
exit $status
