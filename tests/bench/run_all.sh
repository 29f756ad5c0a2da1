#!/usr/bin/env bash
# Runs every benchmark in build/bench/ and every tests/bench/*.sh; each prints its own ratios.
set -u
cd "$(dirname "$0")/../.."
status=0
for b in "${BUILD:-build}"/bench/*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b") =="
  "$b" || status=1
done
for s in tests/bench/*.sh; do
  [ "$(basename "$s")" = run_all.sh ] && continue
  [ -e "$s" ] || continue
  echo "== $s =="
  bash "$s" || status=1
done
exit $status
