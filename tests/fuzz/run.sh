#!/usr/bin/env bash
# tests/fuzz/run.sh: builds the libFuzzer harnesses (build.sh) and runs each for SECONDS (default 60),
# one at a time, in-process (one core): new inputs go to build/fuzz/corpus/NAME (tests/fuzz/corpus/NAME is
# read as seeds), crashes to build/fuzz/crashes/, logs to build/fuzz/logs/NAME.log.
# With --merge, the new inputs are then minimised into tests/fuzz/corpus/NAME (libFuzzer -merge=1);
# the regression files (regress-*: inputs that crashed once) are always kept.
# Usage: bash tests/fuzz/run.sh [--merge] [SECONDS] [NAME...]
set -uo pipefail
cd "$(dirname "$0")/../.."
merge=0
if [ "${1:-}" = --merge ]; then merge=1; shift; fi
secs=${1:-60}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); [ "$n" = fuzz_util ] || names+=("${n#fuzz_}"); done
fi
bash tests/fuzz/build.sh "${names[@]}" || exit 2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# A damaged HDF5 file can make libhdf5 ask malloc for hundreds of GB (361 GB seen), which glibc refuses
# (NULL, and libhdf5 fails cleanly); under ASan the call would abort, or succeed and fill GBs, unless
# allocations above 2 GB return NULL as well.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=2048:suppressions=$PWD/tests/fuzz/asan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
mkdir -p build/fuzz/logs build/fuzz/crashes
status=0
for n in "${names[@]}"; do
    mkdir -p build/fuzz/corpus/$n tests/fuzz/corpus/$n
    dict=(); [ -f tests/fuzz/dict/$n.dict ] && dict=(-dict=tests/fuzz/dict/$n.dict)
    echo "fuzz $n: ${secs} s"
    build/fuzz/fuzz_$n -max_total_time=$secs -timeout=20 -rss_limit_mb=3072 -malloc_limit_mb=1000000 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix=build/fuzz/crashes/$n- "${dict[@]}" \
        build/fuzz/corpus/$n tests/fuzz/corpus/$n >build/fuzz/logs/$n.log 2>&1 || status=1
    grep -E '^#[0-9]+.*(DONE|pulse|NEW)' build/fuzz/logs/$n.log | tail -1
    grep -E 'ERROR|runtime error|deadly signal' build/fuzz/logs/$n.log | head -3
    if [ $merge -eq 1 ]; then
        mkdir -p build/fuzz/merged/$n
        rm -f build/fuzz/merged/$n/*
        build/fuzz/fuzz_$n -merge=1 -artifact_prefix=build/fuzz/crashes/$n- -timeout=20 -rss_limit_mb=2048 build/fuzz/merged/$n tests/fuzz/corpus/$n \
            build/fuzz/corpus/$n >build/fuzz/logs/$n.merge.log 2>&1 &&
            find tests/fuzz/corpus/$n -type f ! -name 'regress-*' -delete && cp build/fuzz/merged/$n/* tests/fuzz/corpus/$n/
        echo "fuzz $n: corpus $(ls tests/fuzz/corpus/$n | wc -l) files, $(du -sh tests/fuzz/corpus/$n | cut -f1)"
    fi
done
exit $status
