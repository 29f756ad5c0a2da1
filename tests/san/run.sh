#!/usr/bin/env bash
# tests/san/run.sh ITEM: runs one item of the sanitizer pass of `make test` with the AddressSanitizer
# + UndefinedBehaviorSanitizer build (make san: build-san/speclab, build-san/test_speclab) and
# passes only if the item passes AND no sanitizer wrote a report. ITEM is
#   unit        the Criterion unit tests (SAN_UNIT_FILTER, if set, narrows them)
#   smoke       tests/san/smoke.sh: every command once on tiny inputs
#   replay      tests/fuzz/replay.sh (the fuzz corpus) linked against the sanitizer build's library,
#               skipped if that file does not exist
#   tests/cli/X a CLI test script, with SPECLAB pointing at the sanitizer binary
# Reports go to files (log_path) rather than stderr, so a report is caught even where a script
# ignores exit codes or stderr; each one found is printed and fails the item. Leaks are checked
# (detect_leaks=1) with suppressions only for third-party libraries (tests/san/lsan.supp).
set -u
cd "$(dirname "$0")/../.."
item=${1:?usage: tests/san/run.sh unit|smoke|replay|tests/cli/SCRIPT}
SAN_S=${SPECLAB_SAN:-build-san/speclab}
SAN_T=${TEST_BIN_SAN:-build-san/test_speclab}
L=$(mktemp -d)
trap 'rm -rf "$L"' EXIT
# handle_sigfpe=0: sl_log_open probes a damaged HDF5 log in a forked child and turns the child's death
# by SIGFPE (libhdf5 1.10.8 divides by a zero chunk dimension, tests/fixtures/hdf5_mutants/) into a
# one-line error; ASan's own SIGFPE handler would make the child exit instead of dying by the signal.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=23:log_path=$L/asan:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:handle_sigfpe=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/san/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=23:log_path=$L/ubsan"
# A script's own valgrind call runs the program directly here (tests/san/novalgrind/valgrind says why).
export PATH="$PWD/tests/san/novalgrind:$PATH"
# One BLAS thread: no re-exec of speclab (sim/cli/main.c) and a smaller leak-check surface.
export OPENBLAS_NUM_THREADS=1

case "$item" in
  unit)
    # shellcheck disable=SC2086
    "$SAN_T" --jobs 2 --short-filename ${SAN_UNIT_FILTER:+--filter "$SAN_UNIT_FILTER"}; rc=$? ;;
  smoke) SPECLAB=$SAN_S bash tests/san/smoke.sh; rc=$? ;;
  replay)
    if [ ! -f tests/fuzz/replay.sh ]; then echo "tests/fuzz/replay.sh does not exist yet: skipped"; exit 0; fi
    # The replay builds its own sanitized driver, sets its own options and reports its own crashes.
    # It links the sanitizer build's library (the folder of $SAN_S) instead of building a third.
    ASAN_OPTIONS= UBSAN_OPTIONS= LSAN_OPTIONS= SPECLAB=$SAN_S REPLAY_LIB=$(dirname "$SAN_S") bash tests/fuzz/replay.sh; rc=$? ;;
  *.py) SPECLAB=$SAN_S /usr/bin/python3 "$item"; rc=$? ;;
  *.sh) SPECLAB=$SAN_S bash "$item"; rc=$? ;;
  *) echo "tests/san/run.sh: unknown item '$item'"; exit 2 ;;
esac

reports=$(find "$L" -type f | sort)
if [ -n "$reports" ]; then
  echo "SANITIZER REPORTS in $item:"
  for f in $reports; do echo "--- $(basename "$f")"; head -60 "$f"; done
  exit 1
fi
exit $rc
