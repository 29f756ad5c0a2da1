#!/usr/bin/env bash
# Runs every test: the Criterion binary (unit tests; the engine's once more with the AVX2 matmul
# forced), then each CLI test script in tests/cli/
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

# The engine's tests again with the AVX2 build of the matmul forced: on a CPU with AVX-512 the run
# above used the AVX-512 build (models/sl_kern.h, sl_kern_select); this covers the other one end to
# end (PyTorch fixtures, block vs single calls) wherever the suite runs.
echo "== engine unit tests, AVX2 build forced (SL_KERN_ISA=avx2) =="
if SL_KERN_ISA=avx2 "${TEST_BIN:-build/test_speclab}" --jobs 2 --short-filename --filter 'engine/*'; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); failures+=("criterion engine/* with SL_KERN_ISA=avx2")
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
