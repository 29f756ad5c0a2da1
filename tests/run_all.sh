#!/usr/bin/env bash
# Runs every test: the Criterion binary (unit tests), then each CLI test script in tests/cli/
# (bash or python; exit 0 = pass). Prints one closing line "tests: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
export SPECLAB=${SPECLAB:-build/speclab}
passed=0
failed=0
failures=()

echo "== unit tests (Criterion) =="
if "${TEST_BIN:-build/test_speclab}" --jobs 2 --short-filename; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); failures+=("criterion")
fi

for t in tests/cli/*.sh tests/cli/*.py; do
  [ -e "$t" ] || continue
  echo "== $t =="
  case "$t" in
    *.py) /usr/bin/python3 "$t" ;;
    *) bash "$t" ;;
  esac
  if [ $? -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$t"); fi
done

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
