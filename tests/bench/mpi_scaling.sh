#!/usr/bin/env bash
# mpi_scaling.sh: strong and weak scaling of the MPI build (analysis/MPI.md) for mc, verify and
# measure.
# Usage: bash tests/bench/mpi_scaling.sh OUT.csv RANKS...   e.g. OUT.csv 1 2 4 8 16
# Env: SPECLAB_MPI (default build/speclab-mpi), MPIRUN_FLAGS (extra mpirun flags), MC_ITERS (strong
# mc total, default 16M), MC_PER_RANK (weak, default 4M), MEASURE_PROMPTS (strong, default 64),
# MEASURE_PER_RANK (weak, default 8), MEASURE_TOKENS (default 32), VERIFY_ITERS (strong verify
# total, default 8M), VERIFY_PER_RANK (weak, default 2M), VERIFY_VOCAB (default 50257: the
# vocabulary of the largest verification, analysis/MPI.md).
# Every rank runs one thread (OMP_NUM_THREADS=1), so a rank is a core. One row per run: the wall
# time of the whole mpirun (start-up, model loading and the log's assembly on rank 0 included),
# and the efficiency: strong t(1) / (n t(n)), weak t(1) / t(n).
# measure uses the shipped draft-s as target and draft-xxs as draft (small: the machine-wide
# benchmark of the model pair is `make bench`), prompts from data/prompts/prose.txt, one sequence
# per shard.
set -u
out=$1; shift
M=${SPECLAB_MPI:-build/speclab-mpi}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
MC_ITERS=${MC_ITERS:-16000000} MC_PER_RANK=${MC_PER_RANK:-4000000}
VI=${VERIFY_ITERS:-8000000} VPR=${VERIFY_PER_RANK:-2000000} VV=${VERIFY_VOCAB:-50257}
MP=${MEASURE_PROMPTS:-64} MPR=${MEASURE_PER_RANK:-8} MT=${MEASURE_TOKENS:-32}
F=models/family
prompts() { awk -v n="$1" '{ l[NR] = $0 } END { for (i = 0; i < n; i++) print l[i % NR + 1] }' data/prompts/prose.txt > "$2"; }
timed() { # prints seconds of: mpirun -np N ARGS...
  local n=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  mpirun --oversubscribe ${MPIRUN_FLAGS:-} -np "$n" "$M" "$@" >/dev/null 2>"$T/err"
  # exit 1 is verify's "rejected" verdict (1% of exact runs at level 0.01): a result, not a failure
  [ $? -le 1 ] || { echo "FAILED: $(tail -1 "$T/err")" >&2; echo nan; return; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'
}
echo "command,scaling,ranks,items,seconds,efficiency" > "$out"
declare -A base=()
row() { # command scaling ranks items seconds
  local key="$1,$2" eff
  [ "$3" = 1 ] && base[$key]=$5
  if [ "$2" = strong ]; then eff=$(awk -v b="${base[$key]}" -v n="$3" -v t="$5" 'BEGIN { print b / (n * t) }')
  else eff=$(awk -v b="${base[$key]}" -v t="$5" 'BEGIN { print b / t }'); fi
  printf '%s,%s,%s,%s,%.3f,%.3f\n' "$1" "$2" "$3" "$4" "$5" "$eff" | tee -a "$out"
}
for n in "$@"; do
  s=$(timed "$n" mc --family noisy --vocab 256 --gamma 4 --iterations "$MC_ITERS" --seed 1 --threads 1 --quiet)
  row mc strong "$n" "$MC_ITERS" "$s"
  it=$((MC_PER_RANK * n))
  s=$(timed "$n" mc --family noisy --vocab 256 --gamma 4 --iterations "$it" --seed 1 --threads 1 --quiet)
  row mc weak "$n" "$it" "$s"
  s=$(timed "$n" verify --family noisy --vocab "$VV" --gamma 4 --iterations "$VI" --seed 1 --threads 1 --quiet)
  row verify strong "$n" "$VI" "$s"
  it=$((VPR * n))
  s=$(timed "$n" verify --family noisy --vocab "$VV" --gamma 4 --iterations "$it" --seed 1 --threads 1 --quiet)
  row verify weak "$n" "$it" "$s"
  prompts "$MP" "$T/p.txt"
  s=$(timed "$n" measure --target $F/draft-s.safetensors --draft $F/draft-xxs.safetensors --prompts "$T/p.txt" \
    --tokens "$MT" --shard-sequences 1 --out "$T/s$n.h5" --quiet)
  row measure strong "$n" "$MP" "$s"
  prompts $((MPR * n)) "$T/w.txt"
  s=$(timed "$n" measure --target $F/draft-s.safetensors --draft $F/draft-xxs.safetensors --prompts "$T/w.txt" \
    --tokens "$MT" --shard-sequences 1 --out "$T/w$n.h5" --quiet)
  row measure weak "$n" $((MPR * n)) "$s"
done
