#!/usr/bin/env bash
# tests/san/valgrind.sh: the CLI smoke test (tests/san/smoke.sh, every command on tiny inputs) with
# each speclab call under valgrind memcheck. A call with an invalid read or write, a use of an
# uninitialised value, a bad free, or a definitely lost block exits 9 instead of its own code, and
# smoke.sh reports it with valgrind's stack. Possibly-lost and still-reachable blocks are not errors:
# libgomp's thread pool and libhdf5's and OpenBLAS's caches stay reachable at exit by design.
# OPENBLAS_NUM_THREADS=1 (set by smoke.sh) also stops speclab re-executing itself (sim/cli/main.c).
set -u
cd "$(dirname "$0")/../.."
if ! command -v valgrind >/dev/null; then
  echo "valgrind.sh: valgrind is not installed (make deps installs it); skipped"
  exit 0
fi
# --read-inline-info=no: stacks without inlined frames, ~1 s less per call (of ~4.5 s, most of it
# reading the debug information of speclab's ~47 libraries).
exec bash tests/san/smoke.sh valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
  --read-inline-info=no --suppressions=tests/san/valgrind.supp
