#!/usr/bin/env bash
# tests/fuzz/build.sh: builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang into
# build/fuzz/: the library is compiled once with -fsanitize=fuzzer-no-link,address,undefined (through
# the Makefile, into build/fuzz/lib), each harness is linked with -fsanitize=fuzzer.
# Usage: bash tests/fuzz/build.sh [NAME...]   (default: every harness)
set -euo pipefail
cd "$(dirname "$0")/../.."
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null || { echo "fuzz build: $CLANG not found (apt-get install clang)" >&2; exit 2; }
OUT=build/fuzz
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
INC="-Isim -Ianalysis -Imodels -Imodels/train -Iplots -Inotebooks_export -Idata -Isim/cli"
PKGS="gsl openblas hdf5 json-c libpcre2-8 libdeflate nettle"
PKG_CFLAGS=$(pkg-config --cflags $PKGS)
PKG_LIBS=$(pkg-config --libs $PKGS | sed 's/-lgslcblas//')
# The AVX-512 matmul (models/sl_kern_wide.c, numeric kernels over buffers its callers size) takes
# clang 14 many minutes and > 1 GB under ASan + UBSan: it is built without instrumentation.
mkdir -p $OUT/lib/models
if [ ! -f $OUT/lib/models/sl_kern_wide.o ] || [ models/sl_kern_wide.c -nt $OUT/lib/models/sl_kern_wide.o ] ||
    [ models/sl_kern_mm.h -nt $OUT/lib/models/sl_kern_wide.o ]; then
    "$CLANG" -std=c11 -D_GNU_SOURCE -O1 -march=x86-64-v3 -mavx512f -fopenmp $INC $PKG_CFLAGS \
        -c models/sl_kern_wide.c -o $OUT/lib/models/sl_kern_wide.o
fi
# The environment's CFLAGS is appended to by the Makefile; OPT on the command line replaces its -O2.
CFLAGS="$SAN" CC="$CLANG" make --no-print-directory -j2 BUILD=$OUT/lib OPT="-O1 -march=x86-64-v3" \
    $OUT/lib/libspeclab.a $OUT/lib/sim/cli/sl_cli.o $OUT/lib/sim/cli/cli_deploy.o >$OUT/lib.log 2>&1 ||
    { tail -20 $OUT/lib.log >&2; exit 2; }
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); [ "$n" = fuzz_util ] || names+=("${n#fuzz_}"); done
fi
for n in "${names[@]}"; do
    "$CLANG" -std=c11 -D_GNU_SOURCE -O1 -march=x86-64-v3 -fopenmp $SAN -fsanitize=fuzzer $INC $PKG_CFLAGS \
        -o $OUT/fuzz_$n tests/fuzz/fuzz_$n.c tests/fuzz/fuzz_util.c \
        $OUT/lib/sim/cli/sl_cli.o $OUT/lib/sim/cli/cli_deploy.o $OUT/lib/libspeclab.a $PKG_LIBS -lpthread -lm -ldl
    echo "built $OUT/fuzz_$n"
done
