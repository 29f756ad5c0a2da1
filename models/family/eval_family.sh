#!/usr/bin/env bash
# eval_family.sh: validation bits per byte of every shipped model on each domain, teacher-forced
# (`speclab eval`, 64 windows of 256 tokens per domain: the trainer's validation windows), into
# FAMILY/eval.csv (family_lib.sh). Run after data/fetch.sh, data/tokenize.sh and make.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
. models/family/family_lib.sh
out=$FAMILY/eval.csv
tmp=$out.tmp
echo "model,domain,params,bits_per_token,bits_per_byte" > "$tmp"
for m in $(family_models | sed "s|^|$FAMILY/|") models/drafts/bigram models/drafts/unigram models/drafts/lookup; do
  [ -f "$m.safetensors" ] || continue
  params=$("$S" model info "$m.safetensors" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0].get("n_params", ""))')
  for d in prose code; do
    OMP_NUM_THREADS=1 "$S" eval --model "$m.safetensors" --tokens "data/corpus/$d.valid.tok" --text "data/corpus/$d.valid.txt" \
      --context 256 --windows 64 --format json |
      /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print("%s,%s,%s,%.4f,%.4f" % (sys.argv[1], sys.argv[2], sys.argv[3], r["bits_per_token"], r["bits_per_byte"]))' \
      "$(basename "$m")" "$d" "$params" >> "$tmp"
  done
done
mv "$tmp" "$out"
cat "$out"
