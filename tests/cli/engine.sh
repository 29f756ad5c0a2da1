#!/usr/bin/env bash
# speclab model info/init and speclab generate: values, reproducibility, and every bad input ->
# exit 2 with a one-line message on stderr and nothing on stdout.
set -u
S=${SPECLAB:-build/speclab}
T=$(mktemp -d /tmp/sl_engine_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check_bad() { # expected-substring args...
  local want=$1; shift
  local out err rc
  out=$("$S" "$@" 2>"$T/err"); rc=$?; err=$(cat "$T/err")
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || ! grep -q -- "$want" <<<"$err"; then
    echo "FAIL: speclab $* -> rc=$rc stderr='$err' (wanted exit 2, one line containing '$want')"; fail=1
  fi
}
G='{"vocab_size":300,"n_layer":2,"n_head":4,"d_model":32,"d_ff":64,"max_seq_len":64}'
L='{"vocab_size":300,"n_layer":1,"n_head":4,"n_kv_head":2,"d_model":32,"d_ff":48,"max_seq_len":64,"tied_embeddings":false}'
"$S" model init --arch gpt2 --config "$G" --seed 1 --init-std 0.2 --out "$T/g.st" || fail=1
"$S" model init --arch gpt2 --config "$G" --seed 1 --init-std 0.2 --out "$T/g2.st" || fail=1
"$S" model init --arch llama --config "$L" --seed 2 --dtype f16 --init-std 0.2 --out "$T/l16.st" || fail=1
cmp -s "$T/g.st" "$T/g2.st" || { echo "FAIL: model init is not reproducible"; fail=1; }

# info: parameter count and bytes against the config, computed independently here.
"$S" model info "$T/l16.st" --format json > "$T/info.json" || fail=1
/usr/bin/python3 - "$T/info.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))[0]
V, d, ff, hd, kv = 300, 32, 48, 8, 2 * 8
mats = 2 * V * d + d * d * 2 + 2 * kv * d + 3 * ff * d   # tok_emb, lm_head, q, o, k, v, up, gate, down
vecs = 2 * d + d                                          # two RMSNorm weights + final norm
assert r["arch"] == "llama" and r["n_kv_head"] == 2 and r["tied_embeddings"] == 0, r
assert r["n_params"] == mats + vecs, (r["n_params"], mats + vecs)
assert r["bytes_f16"] == 2 * mats and r["bytes_f32"] == 4 * vecs, r
assert r["tokenizer"] == 0
PY
"$S" model info "$T/g.st" | grep -q "^arch: gpt2$" || { echo "FAIL: model info text"; fail=1; }

# The file is a standard safetensors file: header parsed by Python's json, offsets contiguous.
/usr/bin/python3 - "$T/g.st" <<'PY' || fail=1
import json, struct, sys, os
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); meta = h.pop("__metadata__")
assert meta["format"] == "speclab-model" and meta["format_version"] == "1" and meta["arch"] == "gpt2"
spans = sorted(tuple(e["data_offsets"]) for e in h.values())
assert spans[0][0] == 0 and all(a[1] == b_[0] for a, b_ in zip(spans, spans[1:])) and spans[-1][1] == len(b) - 8 - n
PY

# generate: a model drafting for itself accepts every draft (p == q, alpha = 1).
"$S" generate --target "$T/g.st" --draft "$T/g2.st" --gamma 4 --prompt-ids 1,2,3 --tokens 20 --seed 3 --format json > "$T/self.json" || fail=1
/usr/bin/python3 -c "
import json,sys; r=json.load(open('$T/self.json')); a=r['acceptance'][0]; g=r['generation'][0]
assert a['alpha_hat']==1 and a['accepted']==a['drafted'] and g['n_new']==20, r
assert len(g['token_ids'].split(','))==20" || { echo "FAIL: self-drafting must accept everything"; fail=1; }
# Same seed, same output bytes, whatever the thread count (timings excluded).
for th in 1 2; do
  OMP_NUM_THREADS=$th "$S" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 3 --prompt-ids 5,6 --tokens 25 \
    --seed 9 --temperature 0.9 --format csv | grep -v -E '^[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+,' > "$T/gen$th.csv" || fail=1
done
grep -q '^2,25,' "$T/gen1.csv" || { echo "FAIL: generate output"; cat "$T/gen1.csv"; fail=1; }
cmp -s "$T/gen1.csv" "$T/gen2.csv" || { echo "FAIL: generate depends on the thread count"; fail=1; }

# Bad input.
head -c 1000 "$T/g.st" > "$T/trunc.st"
printf 'xxxxxxxxnot json at all' > "$T/corrupt.st"
# Same-length edits of the header: an unknown dtype, and an MLP matrix with its shape transposed
# (same bytes, wrong shape for the config).
/usr/bin/python3 - "$T/g.st" "$T/dtype.st" "$T/shape.st" "$T/i32.st" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b'"dtype":"F32"', b'"dtype":"U32"', 1))
# I32 is a known safetensors dtype (n-gram count tables) but never a weight.
open(sys.argv[4], "wb").write(b.replace(b'"dtype":"F32"', b'"dtype":"I32"', 1))
i = b.index(b'"layers.1.mlp.up.weight"')
j = b.index(b'"shape":[64,32]', i)
open(sys.argv[3], "wb").write(b[:j] + b'"shape":[32,64]' + b[j + 15:])
PY
check_bad "unknown dtype 'U32'" model info "$T/dtype.st"
check_bad "weights must be F32, F16 or BF16" model info "$T/i32.st"
check_bad "layers.1.mlp.up.weight' has shape \[32, 64\], the config implies \[64, 32\]" model info "$T/shape.st"
check_bad "trunc.st" model info "$T/trunc.st"
check_bad "past the end" model info "$T/trunc.st"
check_bad "corrupt.st" model info "$T/corrupt.st"
check_bad "cannot open" model info "$T/missing.st"
check_bad "dtype" model init --arch gpt2 --config "$G" --dtype f8 --out "$T/x.st"
check_bad "arch" model init --arch gpt3 --config "$G" --out "$T/x.st"
check_bad "multiple of n_head" model init --arch gpt2 --config '{"vocab_size":9,"n_layer":1,"n_head":3,"d_model":32,"d_ff":8,"max_seq_len":8}' --out "$T/x.st"
check_bad "vocab_size" model init --arch gpt2 --config '{"n_layer":1}' --out "$T/x.st"
check_bad "cannot write" model init --arch gpt2 --config "$G" --out /nonexistent/dir/x.st
check_bad "outside \[0, 300)" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 2 --prompt-ids 1,300 --tokens 5
check_bad "exceed the context" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 2 --prompt-ids 1,2 --tokens 100
check_bad "no tokenizer" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 2 --prompt hello --tokens 5
check_bad "prompt-ids" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 2 --prompt-ids 1,x --tokens 5
check_bad "gamma" generate --target "$T/g.st" --draft "$T/l16.st" --gamma 0 --prompt-ids 1 --tokens 5
check_bad "trunc.st" generate --target "$T/trunc.st" --draft "$T/l16.st" --gamma 2 --prompt-ids 1 --tokens 5
"$S" model init --arch gpt2 --config '{"vocab_size":301,"n_layer":1,"n_head":4,"d_model":32,"d_ff":64,"max_seq_len":64}' --out "$T/v301.st"
check_bad "share a vocabulary" generate --target "$T/g.st" --draft "$T/v301.st" --gamma 2 --prompt-ids 1 --tokens 5

# With a tokenizer: text in, text out.
if [ -f models/tokenizer.json ]; then
  NV=$(/usr/bin/python3 -c "import json; print(len(json.load(open('models/tokenizer.json'))['vocab']))")
  C="{\"vocab_size\":$NV,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":64}"
  "$S" model init --arch gpt2 --config "$C" --seed 4 --tokenizer-json models/tokenizer.json --out "$T/tok.st" || fail=1
  "$S" model info "$T/tok.st" | grep -q "^tokenizer: byte-bpe, $NV tokens$" || { echo "FAIL: tokenizer not present"; fail=1; }
  check_bad "more than vocab_size 300" model init --arch gpt2 --config "$G" --tokenizer-json models/tokenizer.json --out "$T/x.st"
  printf '{"type":"byte-bpe"' > "$T/badtok.json"
  check_bad "badtok.json" model init --arch gpt2 --config "$G" --tokenizer-json "$T/badtok.json" --out "$T/x.st"
  "$S" generate --target "$T/tok.st" --draft "$T/tok.st" --gamma 2 --prompt "int main" --tokens 8 --seed 1 --eos -1 \
    --format json > "$T/tok.json" || fail=1
  /usr/bin/python3 -c "import json; g=json.load(open('$T/tok.json'))['generation'][0]; assert isinstance(g['text'], str) and g['n_new']==8, g" \
    || { echo "FAIL: generate with a tokenizer"; fail=1; }
fi
exit $fail
