#!/usr/bin/env bash
# analysis/verify_detects.sh [OUT.csv]: what the default `speclab verify` run detects, exactly.
# For every synthetic family at verify's defaults (V = 8, gamma = 3) and every rule (the lossless
# ones and each bug-* negative control), `speclab verify --exact` enumerates one iteration of the
# rule's own sampler code and gives the exact deviation each test sees, and the iterations at which
# the first test to see it reaches power 0.9 at verify's level (Holm's first threshold). The
# default run (200000 iterations) detects the rows whose iterations_needed is below that.
# Regenerates analysis/verify_detects.csv (a few seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
OUT=${1:-analysis/verify_detects.csv}
DEFAULT_ITERATIONS=200000
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
rules="exact sampler-match bug-draft-argmax bug-draft-topk bug-residual-paired bug-resample-from-p bug-lowprec-draft bug-p-inplace bug-shared-uniform"
for fam in identical noisy dirichlet zipf disjoint positional; do
  for rule in $rules; do
    "$S" verify --exact --family "$fam" --rule "$rule" --format json |
      /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
e = d["exact"][0]
need = e["iterations_needed"]
detected = "yes" if need is not None and need <= int(sys.argv[3]) else "no"
print(",".join(str(x) for x in [sys.argv[1], sys.argv[2], e["max_tv"], e["first_to_detect"],
      "" if need is None else round(need), sys.argv[3], detected]))' "$fam" "$rule" "$DEFAULT_ITERATIONS" >> "$tmp"
  done
done
{ echo "family,rule,max_tv,first_to_detect,iterations_needed,default_iterations,detected_by_default"; cat "$tmp"; } > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
