#!/usr/bin/env bash
# speclab measure on real (randomly initialised) models through the engine's sl_lm adapter: the log
# names both files with their sha256, analyze reads it, and a vocabulary mismatch or a prompt longer
# than the context is exit 2 with one line. Skipped (exit 0) until the engine is in the tree.
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
for case in "vocabulary mismatch|--draft $D/d4000.safetensors --tokens 5" "longer than the context|--draft $D/d.safetensors --tokens 250"; do
  want=${case%%|*}; args=${case#*|}
  out=$("$S" measure --target "$D/t.safetensors" --prompts "$D/p.txt" $args --out "$D/bad.h5" 2>"$D/err"); rc=$?
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(wc -l < "$D/err")" -ne 1 ] || ! grep -q "$want" "$D/err"; then
    echo "FAIL: $want -> rc=$rc $(cat "$D/err")"; fail=1
  else echo "ok   $want: $(cat "$D/err")"; fi
done
exit $fail
