#!/usr/bin/env bash
# verify_controls.sh: regenerates analysis/verify_controls.csv, the negative-control table of
# `speclab verify --target --draft` (analysis/VERIFY_MODELS.md) on the shipped pair
# models/family/target.safetensors + models/family/draft-s-distilled.safetensors.
#
# Every rule that should pass (exact) and every deliberately wrong one (bug-*, sl_rule_is_bug) is
# run at the default K (verify's defaults: k = 4, gamma 3, T = 1, seed 1, both modes). A bug that
# is not rejected there is run again with 4x the samples, speculative set only (the PIT and first
# tests need no autoregressive set), until it is rejected or K reaches K_CAP (default 64000):
# every run is a row, so the table shows the K at which each bug is caught, or that it was not.
# Columns: rule, verdict, tests_rejected, tests, min_p_holm (the smallest Holm-adjusted p-value),
# K, autoregressive (1: both sets), wall_s (the whole command).
# Usage: analysis/verify_controls.sh [OUT.csv]   (THREADS, K_CAP from the environment)
set -u
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
OUT=${1:-analysis/verify_controls.csv}
TH=${THREADS:-0}
K_CAP=${K_CAP:-64000}
F=models/family
TD=$(mktemp -d); trap 'rm -rf "$TD"' EXIT
head -n 1 data/prompts/prose.txt > "$TD/p.txt"
K0=$("$S" verify --target x --help | sed -n 's/.*continuations per mode (default \([0-9]*\)).*/\1/p')
[ -n "$K0" ] || { echo "verify_controls: cannot read the default K from verify --help" >&2; exit 2; }
echo "rule,verdict,tests_rejected,tests,min_p_holm,K,autoregressive,wall_s" > "$TD/out.csv"
one() { # rule K extra-flags...
  local rule=$1 K=$2; shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$S" verify --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompts "$TD/p.txt" \
    --rule "$rule" --samples "$K" --threads "$TH" --quiet --format csv "$@" > "$TD/r.csv" 2> "$TD/r.err"
  rc=$?
  t1=$(date +%s.%N)
  [ $rc -le 1 ] || { echo "verify_controls: $rule K=$K failed: $(tail -1 "$TD/r.err")" >&2; exit 2; }
  local ar=1; [ $# -gt 0 ] && ar=0
  # The verdict table: rule,lenience,iterations,tokens,tests,rejected_tests,min_p,min_p_holm,...,verdict
  grep -A1 '^rule,' "$TD/r.csv" | tail -1 | awk -F, -v K="$K" -v ar="$ar" -v w="$(echo "$t1 - $t0" | bc)" \
    '{printf "%s,%s,%s,%s,%s,%s,%s,%.1f\n", $1, $NF, $6, $5, $8, K, ar, w}' >> "$TD/out.csv"
  tail -1 "$TD/out.csv" >&2
  return $rc
}
rules="exact $("$S" verify --help | sed -n '/^Rules:/,/\.$/p' | grep -o 'bug-[a-z-]*[a-z]' | sort -u | tr '\n' ' ')"
for rule in $rules; do
  one "$rule" "$K0"
  rejected=$?
  K=$K0
  if [ "$rule" != exact ]; then
    while [ $rejected -eq 0 ] && [ $((K * 4)) -le "$K_CAP" ]; do
      K=$((K * 4))
      one "$rule" "$K" --no-autoregressive
      rejected=$?
    done
  fi
done
mv "$TD/out.csv" "$OUT"
echo "wrote $OUT" >&2
