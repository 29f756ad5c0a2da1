#!/usr/bin/env bash
# evidence_family.sh [extra analysis/evidence.sh options]: the evidence table (measured α per draft
# and prompt domain, speedups against the prediction) for the shipped family: the target and every
# draft of RECIPE (family_lib.sh) plus the n-gram and lookup drafts, as the table in
# models/family/evidence.md was made (24 prompts x 128 tokens per cell, cost from 45 repetitions).
# Writes DIR/evidence.md (default evidence-out; --out DIR to change).
set -euo pipefail
cd "$(dirname "$0")/../.."
. models/family/family_lib.sh
drafts=""
for n in $(family_models); do
  [ "$n" = target ] || drafts="$drafts $n=$FAMILY/$n.safetensors"
done
for n in bigram unigram lookup; do drafts="$drafts $n=models/drafts/$n.safetensors"; done
exec analysis/evidence.sh --target "$FAMILY/target.safetensors" --drafts "${drafts# }" --prompts 24 --tokens 128 \
  --cost-reps 45 "$@"
