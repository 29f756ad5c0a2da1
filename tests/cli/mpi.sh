#!/usr/bin/env bash
# mpi.sh: the MPI build (analysis/MPI.md) against the serial binary. Under `mpirun -np 2` and
# `-np 3` (oversubscribed: the CI machine has 2 cores), every result must equal the serial one
# exactly, since no random stream depends on a rank and every sum is of integers or in item order:
#   - mc and verify: stdout byte for byte (cmp) and the exit status;
#   - measure (synthetic pair, and the gpt2 f32/f16 fixtures of tests/ref/): the HDF5 log compared
#     by h5py, every dataset (dtype, shape, each value: exact equality, no tolerance) and every
#     attribute except created_utc (the time the file was assembled);
#   - measure resumed from the shards of a run on another number of ranks, one shard missing and a
#     killed run's temporary left behind: the same log;
#   - a rank that fails (a corrupt shard it owns): exit 2 on every rank, one message naming the
#     rank and the shard, no OUT.h5;
#   - a rank killed by SIGKILL mid-measure: mpirun fails, no OUT.h5, and the rerun on another
#     number of ranks resumes from the shards left and gives the serial log;
#   - a rank that fails alone (a model missing on that rank only) while the others wait in a
#     collective: the job ends with exit 2 and that rank's message (sl_mpi_finish), no hang;
#   - run: the log value for value but its timings, --tokens-out line for line; analyze: stdout
#     but its seconds column;
#   - a command that is not distributed (theory) runs once, on rank 0.
# SKIP (exit 0) where mpirun is not installed (make deps-mpi installs Open MPI).
set -u
cd "$(dirname "$0")/../.." || exit 2
S=${SPECLAB:-build/speclab}
M=${SPECLAB_MPI:-build/speclab-mpi}
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not installed (make deps-mpi)"
  exit 0
fi
if [ ! -x "$M" ]; then
  if command -v mpicc >/dev/null 2>&1; then
    make --no-print-directory "$M" >/dev/null || { echo "FAIL: cannot build $M"; exit 1; }
  else
    echo "SKIP: $M not built and no mpicc (make mpi)"
    exit 0
  fi
fi
T=$(mktemp -d /tmp/sl_mpi.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
# Root in a container is allowed explicitly; one OpenMP thread per rank on a shared machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# In a container without ptrace rights (Docker's default), the shared-memory transport's
# single-copy mode (CMA) fails on messages above its eager size; copy-in/copy-out works anywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { local n=$1; shift; mpirun --oversubscribe -np "$n" "$M" "$@"; }

cat >"$T/h5cmp.py" <<'PY'
# Two HDF5 logs: the same objects, every dataset equal (dtype, shape, each value exactly), every
# attribute equal but created_utc (wall-clock time of the assembly).
import sys, h5py, numpy as np
# Further names (datasets or attributes, by their last path component) to skip: argv[3:] (the
# timings of a run log, which differ between any two runs).
SKIP = {"created_utc"} | set(sys.argv[3:])
def attrs(o): return {k: o.attrs[k] for k in o.attrs if k not in SKIP}
def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
def objects(f):
    d = {"/": f}
    f.visititems(lambda k, o: d.__setitem__(k, o))
    return d
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
oa, ob = objects(a), objects(b)
bad, n = [], 0
if set(oa) != set(ob): bad.append("objects %s" % sorted(set(oa) ^ set(ob)))
for k in sorted(set(oa) & set(ob)):
    x, y = attrs(oa[k]), attrs(ob[k])
    if set(x) != set(y) or any(not same(x[i], y[i]) for i in x): bad.append("attributes of " + k)
    if isinstance(oa[k], h5py.Dataset):
        if k.split("/")[-1] in SKIP: continue
        n += 1
        if not isinstance(ob[k], h5py.Dataset) or not same(oa[k][()], ob[k][()]): bad.append("dataset " + k)
print("%d datasets %s" % (n, "equal" if not bad else "DIFFER: " + "; ".join(bad)))
sys.exit(1 if bad else 0)
PY
h5same() { # name serial.h5 mpi.h5 [names to skip...]
  local name=$1; shift
  local r; r=$(/usr/bin/python3 "$T/h5cmp.py" "$@" 2>&1) && ok "$name: $r" || bad "$name: $r"
}

# ---- mc and verify: stdout byte for byte, same exit status ----
same_stdout() { # name args...
  local name=$1; shift
  "$S" "$@" >"$T/s.out" 2>/dev/null; local rs=$?
  for n in 2 3; do
    mpi "$n" "$@" >"$T/m.out" 2>/dev/null; local rm=$?
    if [ $rs -eq $rm ] && [ -s "$T/s.out" ] && cmp -s "$T/s.out" "$T/m.out"; then ok "$name -np $n (exit $rm, stdout identical)"
    else bad "$name -np $n: exit $rm (serial $rs), stdout $(cmp "$T/s.out" "$T/m.out" 2>&1)"; fi
  done
}
same_stdout "mc noisy (fused loop)" mc --family noisy --vocab 64 --gamma 4 --iterations 5000 --seed 7 --quiet
same_stdout "mc positional --reference" mc --family positional --vocab 16 --gamma 3 --iterations 3001 --seed 2 \
  --rule bug-resample-from-p --reference --quiet
same_stdout "verify noisy exact" verify --family noisy --vocab 8 --gamma 3 --iterations 20000 --seed 3 --quiet
same_stdout "verify positional bug (rejected)" verify --family positional --vocab 6 --gamma 3 --iterations 7777 \
  --seed 5 --rule bug-resample-from-p --quiet
same_stdout "verify replications" verify --family dirichlet --vocab 4 --gamma 2 --iterations 700 --seed 1 \
  --replications 3 --quiet

# verify with models: the samples split across ranks and merged slot by slot; every table equal
# but the sampling summary's threads and seconds (the last table's row: dropped).
VM=(verify --target tests/ref/gpt2_f32.safetensors --draft tests/ref/gpt2_f16.safetensors --prompt-ids 1,2,3
    --samples 120 --tokens 3 --seed 5 --format csv)
"$S" "${VM[@]}" --threads 1 | sed '$d' >"$T/vm.s"; rs=$?
for n in 2 3; do
  mpi "$n" "${VM[@]}" | sed '$d' >"$T/vm.m"
  [ -s "$T/vm.s" ] && cmp -s "$T/vm.s" "$T/vm.m" && ok "verify --target --draft -np $n: every test identical (timings aside)" \
    || bad "verify --target --draft -np $n: output differs: $(diff "$T/vm.s" "$T/vm.m" | head -3)"
done

# ---- measure: the log, value for value ----
SYN=(measure --synthetic noisy --vocab 50 --sequences 11 --tokens 9 --shard-sequences 2 --seed 4 --quiet)
mkdir -p "$T/s1" "$T/m2" "$T/m3"
"$S" "${SYN[@]}" --out "$T/s1/syn.h5" >"$T/s1/syn.txt" || bad "serial measure (synthetic)"
for n in 2 3; do
  mpi "$n" "${SYN[@]}" --out "$T/m$n/syn.h5" >"$T/m$n/syn.txt" || bad "measure synthetic -np $n: exit $?"
  h5same "measure synthetic -np $n" "$T/s1/syn.h5" "$T/m$n/syn.h5"
  if sed "s#$T/m$n/#$T/s1/#" "$T/m$n/syn.txt" | cmp -s - "$T/s1/syn.txt"; then ok "measure synthetic -np $n: stdout identical"
  else bad "measure synthetic -np $n: stdout differs"; fi
done
printf '1 2 3\n4 5\n6 7 8 9\n10\n11 12\n13 14 15\n16\n' >"$T/ids.txt"
MOD=(measure --target tests/ref/gpt2_f32.safetensors --draft tests/ref/gpt2_f16.safetensors --prompt-ids "$T/ids.txt"
     --tokens 6 --shard-sequences 2 --seed 9 --quiet)
"$S" "${MOD[@]}" --out "$T/s1/mod.h5" >/dev/null || bad "serial measure (models)"
mpi 3 "${MOD[@]}" --out "$T/m3/mod.h5" >/dev/null || bad "measure models -np 3: exit $?"
h5same "measure gpt2 fixtures -np 3" "$T/s1/mod.h5" "$T/m3/mod.h5"

# ---- resume: a 2-rank run's shards, the log and one shard gone, a killed run's temporary ----
rm -f "$T/m2/syn.h5" "$T/m2/syn.h5.d/shard-000002.h5"
touch "$T/m2/syn.h5.d/shard-000004.h5.tmp.12345"
mpi 3 "${SYN[@]}" --out "$T/m2/syn.h5" >/dev/null || bad "measure resume -np 3: exit $?"
[ -e "$T/m2/syn.h5.d/shard-000004.h5.tmp.12345" ] && bad "measure resume: the stale temporary was kept"
h5same "measure resumed on 3 ranks from a 2-rank run" "$T/s1/syn.h5" "$T/m2/syn.h5"

# ---- a failed rank: shard 1 (rank 1's) is garbage ----
mkdir -p "$T/f.h5.d"
echo garbage >"$T/f.h5.d/shard-000001.h5"
mpi 2 "${SYN[@]}" --out "$T/f.h5" >"$T/f.out" 2>"$T/f.err"; rc=$?
n_msg=$(grep -c '^speclab measure: ' "$T/f.err")
if [ $rc -eq 2 ] && [ "$n_msg" -eq 1 ] && grep -q 'rank 1 of 2: .*shard-000001.h5 is not a readable HDF5 shard' "$T/f.err" \
   && [ ! -e "$T/f.h5" ] && [ ! -s "$T/f.out" ]; then
  ok "failed rank: exit 2, one message naming rank 1 and its shard, no OUT.h5"
else
  bad "failed rank: exit $rc, $n_msg messages, OUT.h5 $( [ -e "$T/f.h5" ] && echo present || echo absent): $(cat "$T/f.err")"
fi

# ---- run: the same sequences and tokens; the timings (their own, per rank) aside ----
# A sweep over gamma 1..2 and the baseline, one prompt per shard: 21 sequences over 7 shards.
RUN=(run --target tests/ref/gpt2_f32.safetensors --draft tests/ref/gpt2_f16.safetensors --prompt-ids "$T/ids.txt"
     --tokens 6 --gamma 1:2 --shard-prompts 1 --cost-reps 1 --boot 50 --seed 3)
TIMING=(wall_s draft_s verify_s sample_s v call_s c draft_step_s target_step_s)
"$S" "${RUN[@]}" --out "$T/s1/run.h5" --tokens-out "$T/s1/run.tok" >/dev/null || bad "serial run"
mpi 3 "${RUN[@]}" --out "$T/m3/run.h5" --tokens-out "$T/m3/run.tok" >/dev/null || bad "run -np 3: exit $?"
h5same "run gpt2 fixtures -np 3 (timings aside)" "$T/s1/run.h5" "$T/m3/run.h5" "${TIMING[@]}"
if cmp -s "$T/s1/run.tok" "$T/m3/run.tok" && [ -z "$(ls "$T/m3" | grep 'run.tok.rank-')" ]; then
  ok "run -np 3: --tokens-out identical to the serial file ($(wc -l <"$T/s1/run.tok") lines), no rank parts left"
else bad "run -np 3: --tokens-out differs from the serial file or parts were left"; fi

# ---- analyze: the distribution pass split by chunks; every number identical (CSV, 17 digits)
# but the summary's last column, its seconds ----
"$S" analyze "$T/s1/syn.h5" --format csv | sed '3s/,[^,]*$//' >"$T/an.s"
for n in 2 3; do
  mpi "$n" analyze "$T/s1/syn.h5" --format csv | sed '3s/,[^,]*$//' >"$T/an.m"
  [ -s "$T/an.s" ] && cmp -s "$T/an.s" "$T/an.m" && ok "analyze -np $n: stdout identical (the seconds aside)" \
    || bad "analyze -np $n: stdout differs"
done

# ---- a rank killed (SIGKILL) in the middle of a measure: no OUT.h5; the rerun resumes ----
# 120 sequences: with 24 the three ranks sometimes finished (OUT.h5 written) before the kill landed.
KIL=(measure --synthetic noisy --vocab 600 --sequences 120 --tokens 80 --shard-sequences 1 --seed 8 --quiet)
"$S" "${KIL[@]}" --out "$T/s1/kil.h5" >/dev/null || bad "serial measure (kill test)"
mpi 3 "${KIL[@]}" --out "$T/kil.h5" >/dev/null 2>"$T/kil.err" &
job=$!
victim=""
for _ in $(seq 1 1500); do # up to 30 s: wait for rank 1's first shard, then find rank 1
  if [ -e "$T/kil.h5.d/shard-000001.h5" ]; then
    for pid in $(pgrep -f "speclab-mpi measure --synthetic noisy --vocab 600"); do
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$pid
    done
    break
  fi
  sleep 0.02
done
[ -n "$victim" ] && kill -9 "$victim"
wait "$job"; rc=$?
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ ! -e "$T/kil.h5" ]; then ok "rank 1 killed mid-run: mpirun exit $rc, no OUT.h5"
else bad "rank 1 killed mid-run: victim '${victim}', exit $rc, OUT.h5 $( [ -e "$T/kil.h5" ] && echo present || echo absent)"; fi
n_before=$(ls "$T/kil.h5.d" | grep -c '^shard-.*\.h5$')
mpi 2 "${KIL[@]}" --out "$T/kil.h5" >/dev/null || bad "measure rerun after the kill: exit $?"
h5same "measure rerun on 2 ranks after rank 1 was killed ($n_before of 120 shards kept)" "$T/s1/kil.h5" "$T/kil.h5"

# ---- a rank that fails alone (its model does not load) while rank 0 waits: the job ends ----
# Two programs in one job (mpirun A : B), so that only rank 1 is given a missing target. Rank 0
# waits in the first agreement of measure; rank 1 gives up after SPECLAB_MPI_FAIL_WAIT_S seconds.
FA=(measure --draft tests/ref/gpt2_f16.safetensors --prompt-ids "$T/ids.txt" --tokens 4 --out "$T/alone.h5" --quiet)
SPECLAB_MPI_FAIL_WAIT_S=1 timeout 60 mpirun --oversubscribe -np 1 "$M" "${FA[@]}" --target tests/ref/gpt2_f32.safetensors \
  : -np 1 "$M" "${FA[@]}" --target "$T/missing.safetensors" >"$T/alone.out" 2>"$T/alone.err"; rc=$?
if [ $rc -eq 2 ] && grep -q "^speclab measure: rank 1 of 2: --target .*missing.safetensors" "$T/alone.err" \
   && [ ! -e "$T/alone.h5" ]; then
  ok "a rank failing alone: the job ends (exit 2, no hang), its message names rank 1, no OUT.h5"
else
  bad "a rank failing alone: exit $rc (124 = hung): $(head -c 300 "$T/alone.err")"
fi

# ---- a command that is not distributed runs once ----
"$S" theory --alpha 0.7 --gamma 4 >"$T/th.s"
mpi 3 theory --alpha 0.7 --gamma 4 >"$T/th.m" 2>/dev/null
cmp -s "$T/th.s" "$T/th.m" && ok "theory under -np 3: printed once, as serially" || bad "theory under -np 3 differs"

echo "mpi.sh: $SECONDS s"
exit $fail
