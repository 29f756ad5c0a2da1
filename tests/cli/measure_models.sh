#!/usr/bin/env bash
# speclab measure on real (randomly initialised) models through the engine's sl_lm adapter: the log
# names both files with their sha256, analyze reads it; the same prompts given as token ids
# (--prompt-ids) give the same log; a vocabulary mismatch, a prompt longer than the context, both
# prompt kinds, an id outside the vocabulary and an option that would be ignored are exit 2 with one
# line. Skipped (exit 0) until the engine is in the tree.
set -u
S=${SPECLAB:-build/speclab}
if ! "$S" model --help >/dev/null 2>&1; then echo "skipped: the inference engine (speclab model) is not built yet"; exit 0; fi
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail=0
T=models/tokenizer.json
"$S" model init --arch gpt2 --config '{"vocab_size":4096,"n_layer":2,"n_head":4,"d_model":64,"d_ff":256,"max_seq_len":256}' \
  --out "$D/t.safetensors" --seed 1 --tokenizer-json "$T" >/dev/null || { echo "FAIL: model init"; exit 1; }
"$S" model init --arch llama --config '{"vocab_size":4096,"n_layer":1,"n_head":2,"d_model":32,"d_ff":96,"max_seq_len":256}' \
  --out "$D/d.safetensors" --seed 2 >/dev/null || { echo "FAIL: model init"; exit 1; }
"$S" model init --arch gpt2 --config '{"vocab_size":4000,"n_layer":1,"n_head":2,"d_model":32,"d_ff":128,"max_seq_len":256}' \
  --out "$D/d4000.safetensors" --seed 3 >/dev/null || { echo "FAIL: model init"; exit 1; }
head -4 data/prompts/prose.txt > "$D/p.txt"
if "$S" measure --target "$D/t.safetensors" --draft "$D/d.safetensors" --prompts "$D/p.txt" --tokens 30 \
     --temperature 0.8 --out "$D/m.h5" >/dev/null; then
  /usr/bin/python3 - "$D" <<'PY' || fail=1
import hashlib, sys, h5py, numpy as np
d = sys.argv[1]
f = h5py.File(f"{d}/m.h5", "r")
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
ok = f.attrs["target_sha256"].decode() == sha(f"{d}/t.safetensors") and f.attrs["draft_sha256"].decode() == sha(f"{d}/d.safetensors")
ok &= f["positions/beta"].shape == (120,) and f["distributions/p"].shape == (120, 4096) and f.attrs["temperature"] == 0.8
p = f["distributions/p"][:].astype(np.float64); q = f["distributions/q"][:].astype(np.float64)
ok &= np.abs(np.minimum(p, q).sum(1) - f["positions/beta"][:]).max() < 4096 * 2**-24  # float32 rounding
print("measure with real models:", "ok" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PY
  "$S" analyze "$D/m.h5" --gamma-max 4 --format json >/dev/null || { echo "FAIL: analyze of a real-model log"; fail=1; }
else
  echo "FAIL: measure with real models"; fail=1
fi
# --prompt-ids with models: the same prompts as token ids (encoded here by `speclab tokenize encode
# --jsonl`, another route than measure's own tokenization) give the same log: every dataset equal
# exactly (the same computation), the attributes too except `source`, which names the prompt file, and `created_utc`.
/usr/bin/python3 - "$D/p.txt" > "$D/p.jsonl" <<'PY'
import json, sys
unesc = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
for line in open(sys.argv[1], encoding="utf-8"):
    out, it = [], iter(line.rstrip("\n"))
    for ch in it:
        out.append(unesc[next(it)] if ch == "\\" else ch)
    print(json.dumps("".join(out)))
PY
if "$S" tokenize encode --tokenizer "$D/t.safetensors" --jsonl --in "$D/p.jsonl" > "$D/ids.txt" \
   && "$S" measure --target "$D/t.safetensors" --draft "$D/d.safetensors" --prompt-ids "$D/ids.txt" --tokens 30 \
     --temperature 0.8 --out "$D/m_ids.h5" >/dev/null; then
  /usr/bin/python3 - "$D" <<'PY' || fail=1
import sys, h5py, numpy as np
d = sys.argv[1]
a, b = h5py.File(f"{d}/m.h5", "r"), h5py.File(f"{d}/m_ids.h5", "r")
def datasets(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
da, db = datasets(a), datasets(b)
bad = sorted(set(da) ^ set(db)) + [k for k in da if k in db and not np.array_equal(da[k], db[k])]
bad += ["attr " + k for k in set(a.attrs) | set(b.attrs) if k not in ("source", "created_utc") and not np.array_equal(a.attrs.get(k), b.attrs.get(k))]
ok = not bad and len(da) >= 10 and b.attrs["source"].decode().startswith("models; prompt_ids")
print("measure --prompt-ids with models equals --prompts:", "ok" if ok else "MISMATCH %s" % bad)
sys.exit(0 if ok else 1)
PY
else
  echo "FAIL: measure --prompt-ids with real models"; fail=1
fi
printf '1 2 3\n4 4096\n' > "$D/ids_bad.txt"
for case in "vocabulary mismatch|--draft $D/d4000.safetensors --prompts $D/p.txt --tokens 5" \
            "longer than the context|--draft $D/d.safetensors --prompts $D/p.txt --tokens 250" \
            "one of --prompts and --prompt-ids|--draft $D/d.safetensors --prompts $D/p.txt --prompt-ids $D/ids.txt --tokens 5" \
            "outside the vocabulary|--draft $D/d.safetensors --prompt-ids $D/ids_bad.txt --tokens 5" \
            "not tokenized|--draft $D/d.safetensors --prompt-ids $D/ids.txt --tokenizer $T --tokens 5" \
            "option of the synthetic pair|--draft $D/d.safetensors --prompts $D/p.txt --sequences 3 --tokens 5"; do
  want=${case%%|*}; args=${case#*|}
  out=$("$S" measure --target "$D/t.safetensors" $args --out "$D/bad.h5" 2>"$D/err"); rc=$?
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(wc -l < "$D/err")" -ne 1 ] || ! grep -q "$want" "$D/err"; then
    echo "FAIL: $want -> rc=$rc $(cat "$D/err")"; fail=1
  else echo "ok   $want: $(cat "$D/err")"; fi
done
exit $fail
