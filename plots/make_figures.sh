#!/usr/bin/env bash
# plots/make_figures.sh: regenerates the example figures in plots/examples/ (PNG, column width,
# each with its .dat and .gp): the four closed-form figures, and the beta histogram, lenience curve,
# acceptance per position and alpha with CI of two small synthetic measure logs (noise 1 and 2).
# Usage: bash plots/make_figures.sh   (from the repository root, after `make`)
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
OUT=plots/examples
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$S" plot theory-tokens -o "$OUT/theory-tokens.png"
"$S" plot theory-speedup --c 0.05 -o "$OUT/theory-speedup.png"
"$S" plot theory-optimal-gamma -o "$OUT/theory-optimal-gamma.png"
"$S" plot theory-ops -o "$OUT/theory-ops.png"

# Two synthetic pairs: the noisy family at draft logit noise 1 and 2 (speclab measure --synthetic).
"$S" measure --synthetic noisy --noise 1 --tokens 128 --sequences 16 --vocab 256 --out "$work/noise1.h5" >/dev/null
"$S" measure --synthetic noisy --noise 2 --tokens 128 --sequences 16 --vocab 256 --out "$work/noise2.h5" >/dev/null
"$S" plot beta-hist "noise 1=$work/noise1.h5" "noise 2=$work/noise2.h5" -o "$OUT/beta-hist.png"
"$S" plot lenience "noise 1=$work/noise1.h5" -o "$OUT/lenience.png"
"$S" plot acceptance-position "noise 1=$work/noise1.h5" -o "$OUT/acceptance-position.png"
"$S" plot alpha-ci "noise 1=$work/noise1.h5" "noise 2=$work/noise2.h5" -o "$OUT/alpha-ci.png"
"$S" plot mc-tokens --family noisy --gamma 4 -o "$OUT/mc-tokens.png"

# The scripts name the synthetic logs' temporary paths only in their header comment; the data they
# read sit next to them.
ls -l "$OUT"/*.png
