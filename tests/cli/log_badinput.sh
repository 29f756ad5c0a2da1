#!/usr/bin/env bash
# Bad input for measure, analyze and recommend: exit 2, one line on stderr naming the problem,
# nothing on stdout, and nothing lost (an existing output is left as it was).
set -u
S=${SPECLAB:-build/speclab}
PY=/usr/bin/python3
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail=0
check_bad() { # expected-substring args...
  local want=$1; shift
  local out err rc
  out=$("$S" "$@" 2>"$D/err"); rc=$?; err=$(cat "$D/err")
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || ! grep -q -- "$want" <<<"$err"; then
    echo "FAIL: speclab $* -> rc=$rc stderr='$err' (wanted exit 2, one line containing '$want')"; fail=1
  else
    echo "ok   $want: $err"
  fi
}
"$S" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --out "$D/good.h5" >/dev/null || { echo "FAIL: making good.h5"; exit 1; }
"$S" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --dist none --out "$D/beta.h5" >/dev/null || exit 1
sum_before=$(md5sum < "$D/good.h5")

# A log of another schema version, a file that is not a log, missing or reshaped datasets, bad values.
cp "$D/good.h5" "$D/v2.h5"; $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['schema_version']=2" "$D/v2.h5"
check_bad "schema version 2" analyze "$D/v2.h5"
cp "$D/good.h5" "$D/noschema.h5"; $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); del f.attrs['schema']" "$D/noschema.h5"
check_bad "not a speclab log" analyze "$D/noschema.h5"
cp "$D/good.h5" "$D/missing.h5"; $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); del f['positions/q_max']" "$D/missing.h5"
check_bad "missing dataset /positions/q_max" analyze "$D/missing.h5"
cp "$D/good.h5" "$D/shape.h5"; $PY -c "
import h5py,sys,numpy as np; f=h5py.File(sys.argv[1],'r+'); p=f['distributions/p'][:, :63]; del f['distributions/p']; f['distributions/p']=p" "$D/shape.h5"
check_bad "wrong shape" analyze "$D/shape.h5"
cp "$D/good.h5" "$D/rows.h5"; $PY -c "
import h5py,sys,numpy as np; f=h5py.File(sys.argv[1],'r+'); b=f['positions/beta'][:-1]; del f['positions/beta']; f['positions/beta']=b" "$D/rows.h5"
check_bad "rows" analyze "$D/rows.h5"
cp "$D/good.h5" "$D/nan.h5"; $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f['positions/beta'][5]=float('nan')" "$D/nan.h5"
check_bad "row 5" analyze "$D/nan.h5"
cp "$D/good.h5" "$D/neg.h5"; $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f['distributions/q'][7,3]=-0.25" "$D/neg.h5"
check_bad "row 7" analyze "$D/neg.h5"
# The --beta-only pass checks every value in its vectorised loop (16 at a time) and in the tail
# (a vocabulary of 70 = 4 x 16 + 6): NaN, negative and > 1, in p and in q, each must be caught.
"$S" measure --synthetic noisy --vocab 70 --sequences 2 --tokens 20 --out "$D/v70.h5" >/dev/null || exit 1
for spec in "p 3 5 nan" "q 9 17 -0.5" "p 11 66 1.5" "q 2 69 nan" "q 0 0 -1e-30"; do
  read -r which row col val <<<"$spec"
  cp "$D/v70.h5" "$D/bo.h5"
  $PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f['distributions/$which'][$row,$col]=float('$val')" "$D/bo.h5"
  check_bad "row $row" analyze --beta-only "$D/bo.h5"
done
"$S" analyze --beta-only "$D/v70.h5" --format csv >/dev/null || { echo "FAIL: analyze --beta-only v70.h5"; fail=1; }
head -c 3000 "$D/good.h5" > "$D/trunc.h5"
check_bad "corrupt or truncated" analyze "$D/trunc.h5"
printf 'not hdf5 at all\n' > "$D/text.h5"
check_bad "not an HDF5 file" analyze "$D/text.h5"
check_bad "cannot open" analyze "$D/nonexistent.h5"
check_bad "row 5" analyze --validate "$D/nan.h5"
check_bad "token 3" analyze --validate "$D/neg.h5"
check_bad "schema version 2" analyze --validate "$D/v2.h5"
"$S" analyze --validate "$D/good.h5" --format csv | grep -q ',1,1$' || { echo "FAIL: analyze --validate good.h5"; fail=1; }
check_bad "beta-level data only" analyze --beta-only "$D/beta.h5"
check_bad "--c: .*measure log without costs" recommend "$D/good.h5"
check_bad "gamma-max" analyze --gamma-max 0 "$D/good.h5"
check_bad "lenience" analyze --lenience 0 "$D/good.h5"
check_bad "v-table" analyze --v-table 2 "$D/good.h5"

# measure: unwritable output paths, vocabulary mismatch, a prompt longer than the context, bad ids.
check_bad "cannot write output" measure --synthetic noisy --tokens 5 --out /nonexistent/dir/x.h5
check_bad "cannot write output" measure --synthetic noisy --tokens 5 --out /proc/x.h5
check_bad "vocabulary mismatch" measure --synthetic noisy --vocab 64 --draft-vocab 65 --tokens 5 --out "$D/vm.h5"
check_bad "longer than the context" measure --synthetic noisy --context 8 --prompt-len 10 --tokens 5 --out "$D/ctx.h5"
printf '1 2 3\n4 999\n' > "$D/ids.txt"
check_bad "outside the vocabulary" measure --synthetic noisy --vocab 64 --prompt-ids "$D/ids.txt" --tokens 5 --out "$D/ids.h5"
check_bad "--dist" measure --synthetic noisy --tokens 5 --dist float8 --out "$D/x.h5"
check_bad "--tokens is required" measure --synthetic noisy --out "$D/x.h5"
check_bad "other settings" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --seed 2 --out "$D/good.h5"
[ "$(md5sum < "$D/good.h5")" = "$sum_before" ] || { echo "FAIL: good.h5 changed after a refused rerun"; fail=1; }
exit $fail
