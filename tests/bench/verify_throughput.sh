#!/usr/bin/env bash
# verify_throughput.sh: the per-rank throughput of `speclab verify` at a large vocabulary, for the
# cost of the largest verification (tests/bench/verify_cost.py turns the CSV into wall time and
# core-hours; analysis/MPI.md).
# Usage: bash tests/bench/verify_throughput.sh [OUT.csv] [NP]   (no OUT.csv: the CSV is printed only)
#   no NP: the serial binary, one thread ($SPECLAB, default build/speclab);
#   NP:    mpirun -np NP of $SPECLAB_MPI (default build/speclab-mpi), one thread per rank, and
#          every size below multiplied by NP (each rank gets the serial run's share: weak scaling).
# Env: SIZES (iterations per rank, default "1000000 2000000 4000000"), REPS (runs per size, median
# taken, default 3), VOCAB (default 50257), GAMMA (default 4), FAMILY (default noisy),
# MPIRUN_FLAGS (extra mpirun flags, e.g. "--bind-to core").
# Real models instead of a family: TARGET and DRAFT (model specs), VOCAB their vocabulary, TOKENS
# (default 4): `verify --target --draft --samples N --tokens TOKENS` on a fixed prompt, both modes;
# an "iteration" is then one sample (a speculative and an autoregressive continuation), the unit
# of the first-token test that verify_cost.py plans for.
# Each run is the whole command's wall time: start-up, the family's plan (alias tables, O(V)),
# the sampler and its block-by-block counting (O(iterations)), the tests (O(V) once every test has
# >= 5 observations per category, as at these sizes: no Monte Carlo p-value) and, under MPI, the
# sum of the count tables. A least-squares line t = fixed_s + per_rank_iterations / rate through
# the medians separates the two: rate is the sampler+counting throughput of one rank (iterations/s),
# fixed_s everything that does not grow with the iterations (the tests among it).
# Rows: one "run" row per size (median seconds), then one "fit" row.
set -u
out=${1:-}
NP=${2:-}
S=${SPECLAB:-build/speclab}
M=${SPECLAB_MPI:-build/speclab-mpi}
SIZES=${SIZES:-1000000 2000000 4000000}
REPS=${REPS:-3}
V=${VOCAB:-50257} G=${GAMMA:-4} FAM=${FAMILY:-noisy}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -n "$out" ] || out=$T/verify_throughput.csv # bare (make bench): printed only, no file left behind
ranks=${NP:-1}
if [ -n "${TARGET:-}" ]; then
  FAM="models:$(basename "$TARGET" .safetensors)+$(basename "$DRAFT" .safetensors)"
  WHAT=(--target "$TARGET" --draft "$DRAFT" --prompt-ids 1,2,3,4,5,6,7,8 --tokens "${TOKENS:-4}" --gamma "$G" --samples)
else
  WHAT=(--family "$FAM" --vocab "$V" --gamma "$G" --iterations)
fi
run() { # iterations -> seconds on stdout; the command's CSV in $T/out.csv
  local t0 t1 rc
  t0=$(date +%s.%N)
  if [ -n "$NP" ]; then
    # shellcheck disable=SC2086
    mpirun --oversubscribe ${MPIRUN_FLAGS:-} -np "$NP" "$M" verify "${WHAT[@]}" "$1" --seed 1 --threads 1 --quiet \
      --format csv > "$T/out.csv" 2> "$T/err"
  else
    "$S" verify "${WHAT[@]}" "$1" --seed 1 --threads 1 --quiet --format csv > "$T/out.csv" 2> "$T/err"
  fi
  rc=$?
  t1=$(date +%s.%N)
  [ $rc -le 1 ] || { echo "verify_throughput: verify failed: $(tail -1 "$T/err")" >&2; exit 2; }
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "row,ranks,threads,family,vocab,gamma,iterations,per_rank_iterations,seconds,tests,small_count_tests,per_rank_iterations_per_s,fixed_s" > "$out"
for n in $SIZES; do
  it=$((n * ranks))
  ts=""
  for _ in $(seq "$REPS"); do ts="$ts $(run "$it")"; done
  med=$(echo "$ts" | median)
  # The verdict table's "tests" column, and the tests whose p-value came from Monte Carlo or
  # exact enumeration (their cost grows with n: the fit assumes none).
  tests=$(grep -A1 '^rule,' "$T/out.csv" | tail -1 | cut -d, -f5)
  small=$(awk -F, '/^test,/ { on = 1; next } on && NF > 10 && ($11 == "monte-carlo" || $11 == "exact") { c++ } END { print c + 0 }' "$T/out.csv")
  [ "$small" = 0 ] || echo "verify_throughput: $small tests used small-count p-values at $it iterations: use larger SIZES" >&2
  echo "run,$ranks,1,$FAM,$V,$G,$it,$n,$med,$tests,$small,," | tee -a "$out"
done
# Least squares of seconds on per-rank iterations over the run rows.
awk -F, -v OFS=, 'NR > 1 && $1 == "run" { n++; x = $8; y = $9; sx += x; sy += y; sxx += x * x; sxy += x * y; last = $0 }
  END {
    if (n < 2) { print "verify_throughput: need two sizes" > "/dev/stderr"; exit 2 }
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n
    split(last, f, ",")
    printf "fit,%s,1,%s,%s,%s,,,,%s,%s,%.1f,%.4f\n", f[2], f[4], f[5], f[6], f[10], f[11], 1 / b, a
  }' "$out" | tee -a "$out"
[ -z "${1:-}" ] || echo "wrote $out" >&2
