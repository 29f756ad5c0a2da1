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
mpi() { local n=$1; shift; mpirun --oversubscribe -np "$n" "$M" "$@"; }

cat >"$T/h5cmp.py" <<'PY'
# Two HDF5 logs: the same objects, every dataset equal (dtype, shape, each value exactly), every
# attribute equal but created_utc (wall-clock time of the assembly).
import sys, h5py, numpy as np
SKIP = {"created_utc"}
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
        n += 1
        if not isinstance(ob[k], h5py.Dataset) or not same(oa[k][()], ob[k][()]): bad.append("dataset " + k)
print("%d datasets %s" % (n, "equal" if not bad else "DIFFER: " + "; ".join(bad)))
sys.exit(1 if bad else 0)
PY
h5same() { # name serial.h5 mpi.h5
  local r; r=$(/usr/bin/python3 "$T/h5cmp.py" "$2" "$3" 2>&1) && ok "$1: $r" || bad "$1: $r"
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

# ---- a command that is not distributed runs once ----
"$S" theory --alpha 0.7 --gamma 4 >"$T/th.s"
mpi 3 theory --alpha 0.7 --gamma 4 >"$T/th.m" 2>/dev/null
cmp -s "$T/th.s" "$T/th.m" && ok "theory under -np 3: printed once, as serially" || bad "theory under -np 3 differs"

echo "mpi.sh: $SECONDS s"
exit $fail
