#!/usr/bin/env bash
# gpu_pack.sh: tests/bench/gpu_pack.py (models packed for a trip to the GPU machine) round-trips a
# model byte for byte (an even and an odd length), and bad input gives one line on stderr and exit
# status 2 without writing or replacing anything: an existing output, a missing part, a truncated
# or flipped low part, a damaged xz part, a damaged checksum file.
set -u
cd "$(dirname "$0")/../.."
P="/usr/bin/python3 tests/bench/gpu_pack.py"
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
fail=0
expect2() { # DESCRIPTION COMMAND...: exit 2 with one line on stderr
  local what=$1; shift
  "$@" > "$D/out" 2> "$D/err"; local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l < "$D/err")" -ne 1 ]; then echo "FAIL: $what: exit $rc, stderr: $(cat "$D/err")"; fail=1
  else echo "ok   $what: $(cat "$D/err")"; fi
}
for f in tests/ref/gpt2_f16.safetensors models/drafts/lookup.safetensors; do
  cp "$f" "$D/m"; [ $(( $(stat -c %s "$D/m") % 2 )) -eq 1 ] || printf 'x' >> "$D/m" # one odd length
  for m in "$f" "$D/m"; do
    rm -f "$D"/p.* "$D/back"
    $P pack "$m" "$D/p" && $P unpack "$D/p" "$D/back" && cmp -s "$m" "$D/back" \
      && echo "ok   round trip of $(basename "$m") ($(stat -c %s "$m") bytes)" || { echo "FAIL: round trip of $m"; fail=1; }
  done
done
echo keep > "$D/exists"
expect2 "unpack onto an existing file" $P unpack "$D/p" "$D/exists"
[ "$(cat "$D/exists")" = keep ] || { echo "FAIL: an existing file was replaced"; fail=1; }
expect2 "pack onto existing parts" $P pack "$D/m" "$D/p"
expect2 "missing part" $P unpack "$D/none" "$D/o1"
cp "$D/p.lo" "$D/lo.bak"; head -c 100 "$D/lo.bak" > "$D/p.lo"
expect2 "truncated low part" $P unpack "$D/p" "$D/o2"
cp "$D/lo.bak" "$D/p.lo"; printf '\x01' | dd of="$D/p.lo" bs=1 seek=50 conv=notrunc status=none
expect2 "flipped byte in the low part" $P unpack "$D/p" "$D/o3"
cp "$D/lo.bak" "$D/p.lo"; cp "$D/p.hi.xz" "$D/hi.bak"; head -c 20 "$D/hi.bak" > "$D/p.hi.xz"
expect2 "damaged xz part" $P unpack "$D/p" "$D/o4"
cp "$D/hi.bak" "$D/p.hi.xz"; echo "12 nonsense" > "$D/p.sum"
expect2 "damaged checksum file" $P unpack "$D/p" "$D/o5"
expect2 "usage" $P frobnicate a b
for o in o1 o2 o3 o4 o5; do [ ! -e "$D/$o" ] || { echo "FAIL: $o written on bad input"; fail=1; }; done
[ $fail = 0 ] && echo "gpu_pack: all checks passed"
exit $fail
