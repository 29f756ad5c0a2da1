#!/usr/bin/env bash
# tests/fuzz/replay.sh: replays every corpus file of tests/fuzz/corpus/NAME/ through harness
# tests/fuzz/fuzz_NAME.c, built with the project's normal compiler (no clang, no libFuzzer): a plain
# driver (replay_main.c) feeds each file to LLVMFuzzerTestOneInput, under AddressSanitizer and
# UBSan when the compiler has them. The library is built by the Makefile into build/fuzz-replay
# (-O0, incremental), or, with REPLAY_LIB=DIR, taken from the sanitizer build in DIR (`make san`:
# build-san, the same sanitizers; what `make test` does, so that the suite compiles the library
# twice, not three times). Prints one closing line, "fuzz replay: N files, M harnesses, K
# crashes", and exits 1 when K > 0 (each crashing file is named above it).
set -uo pipefail
cd "$(dirname "$0")/../.."
CC=${CC:-cc}
OUT=build/fuzz-replay
# gcc leaves float-cast-overflow out of -fsanitize=undefined (clang has it): named here, so that
# a double that does not fit its integer type (UB) is caught by both builds.
SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
echo 'int main(void){return 0;}' > /tmp/slfuzz_san_$$.c
if ! $CC $SAN -o /tmp/slfuzz_san_$$ /tmp/slfuzz_san_$$.c 2>/dev/null; then
    echo "fuzz replay: $CC has no sanitizers; replaying without them" >&2
    SAN=""
fi
rm -f /tmp/slfuzz_san_$$ /tmp/slfuzz_san_$$.c
LIB=${REPLAY_LIB:-$OUT} # the library's build folder
# The Makefile does not track flags: a change of compiler, sanitizers or library starts afresh.
stamp="$CC $SAN $LIB"
if [ "$(cat $OUT/flags 2>/dev/null)" != "$stamp" ]; then rm -rf $OUT; fi
mkdir -p $OUT && echo "$stamp" > $OUT/flags
if [ -n "${REPLAY_LIB:-}" ]; then
    for f in libspeclab.a sim/cli/sl_cli.o sim/cli/cli_deploy.o; do
        [ -f "$LIB/$f" ] || { echo "fuzz replay: $LIB/$f does not exist (make san builds it)"; exit 1; }
    done
# The environment's CFLAGS is appended to by the Makefile; OPT on the command line replaces its -O2.
elif ! CFLAGS="$SAN -g" make --no-print-directory -j2 BUILD=$OUT OPT="-O0 -march=x86-64-v3" \
    $OUT/libspeclab.a $OUT/sim/cli/sl_cli.o $OUT/sim/cli/cli_deploy.o >$OUT.log 2>&1; then
    tail -20 $OUT.log >&2
    echo "fuzz replay: the library did not build (see $OUT.log)"
    exit 1
fi
INC="-Isim -Ianalysis -Imodels -Imodels/train -Iplots -Inotebooks_export -Idata -Isim/cli"
PKGS="gsl openblas hdf5 json-c libpcre2-8 libdeflate nettle"
PKG_CFLAGS=$(pkg-config --cflags $PKGS)
PKG_LIBS=$(pkg-config --libs $PKGS | sed 's/-lgslcblas//')
# Sanitizer reports end the process with status 1 (leaks included); a hang is cut after 120 s.
# allocator_may_return_null, max_allocation_size_mb: as in run.sh, libhdf5's giant mallocs on a
# damaged file return NULL, as glibc's do.
# Appended to any options set by the caller (the suite's sanitizer pass): the later value of a flag wins.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=2048:suppressions=$PWD/tests/fuzz/asan.supp:exitcode=86"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
files=0 harnesses=0 crashes=0
for src in tests/fuzz/fuzz_*.c; do
    n=$(basename "$src" .c)
    n=${n#fuzz_}
    [ -d tests/fuzz/corpus/$n ] || continue
    bin=$OUT/replay_$n
    if [ ! -x $bin ] || [ -n "$(find tests/fuzz/fuzz_$n.c tests/fuzz/fuzz_util.[ch] tests/fuzz/replay_main.c $LIB/libspeclab.a -newer $bin 2>/dev/null)" ]; then
        if ! $CC -std=c11 -D_GNU_SOURCE -O0 -g -march=x86-64-v3 -fopenmp $SAN $INC $PKG_CFLAGS -o $bin \
            tests/fuzz/replay_main.c $src tests/fuzz/fuzz_util.c $LIB/sim/cli/sl_cli.o $LIB/sim/cli/cli_deploy.o \
            $LIB/libspeclab.a $PKG_LIBS -lgomp -lpthread -lm -ldl 2>$OUT.$n.log; then
            cat $OUT.$n.log >&2
            echo "fuzz replay: harness $n did not build"
            exit 1
        fi
    fi
    harnesses=$((harnesses + 1))
    k=$(find tests/fuzz/corpus/$n -type f | wc -l)
    files=$((files + k))
    if ! timeout 120 $bin tests/fuzz/corpus/$n >$OUT.$n.log 2>&1; then
        # Find the files that crash, one process each.
        before=$crashes
        for f in $(find tests/fuzz/corpus/$n -type f | sort); do
            if ! timeout 60 $bin "$f" >$OUT.$n.one.log 2>&1; then
                crashes=$((crashes + 1))
                echo "CRASH: $n $f" >&2
                grep -m 8 -E 'ERROR|runtime error|#[0-9] ' $OUT.$n.one.log >&2
            fi
        done
        if [ $crashes -eq $before ]; then # only the whole corpus in one process fails
            crashes=$((crashes + 1))
            echo "CRASH: $n (the whole corpus in one process; every file alone passes)" >&2
            grep -m 8 -E 'ERROR|runtime error|#[0-9] ' $OUT.$n.log >&2
        fi
    fi
done
echo "fuzz replay: $files files, $harnesses harnesses, $crashes crashes"
[ $crashes -eq 0 ]
