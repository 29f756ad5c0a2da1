#!/usr/bin/env bash
# Progress lines (STYLE.md 10): `measure` draws "measure: done/total sequences ..." on stderr when
# stderr is a terminal (a pty from util-linux `script`), nothing when stderr is a file or with
# --quiet, and stdout carries the same result bytes either way.
set -u
S=${SPECLAB:-build/speclab}
fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
M="$S measure --synthetic noisy --vocab 500 --sequences 12 --tokens 32 --shard-sequences 4"

# A terminal: the line counts up to 12/12 and ends with a newline.
script -qc "$M --out $T/a.h5 >$T/tty.out" /dev/null > "$T/tty.term" 2>&1
if ! grep -aq 'measure: 12/12 sequences' "$T/tty.term"; then
  echo "FAIL: no 'measure: 12/12 sequences' progress line on a terminal: $(cat -A "$T/tty.term" | head -c 400)"; fail=1
fi
if ! grep -aq 'sequences/s' "$T/tty.term"; then echo "FAIL: the progress line has no rate"; fail=1; fi

# A terminal with --quiet: nothing.
script -qc "$M --quiet --out $T/b.h5 >$T/quiet.out" /dev/null > "$T/quiet.term" 2>&1
if grep -aq 'measure:' "$T/quiet.term"; then echo "FAIL: --quiet still drew a progress line"; fail=1; fi

# stderr a file: nothing on it, exit 0.
$M --out "$T/c.h5" >"$T/file.out" 2>"$T/file.err" || { echo "FAIL: measure with stderr to a file failed"; fail=1; }
if [ -s "$T/file.err" ]; then echo "FAIL: stderr to a file is not empty: $(head -c 200 "$T/file.err")"; fail=1; fi

# stdout is the same in all three cases, apart from the file name (of the same length) in the report.
for k in tty quiet; do
  if ! diff <(sed "s#$T/[ab].h5#OUT#" "$T/$k.out") <(sed "s#$T/c.h5#OUT#" "$T/file.out") >/dev/null; then
    echo "FAIL: stdout of the $k run differs from the run with stderr to a file"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "progress: ok"
exit $fail
