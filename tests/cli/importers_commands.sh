#!/usr/bin/env bash
# Issue 16, item 1: every command that takes a model takes every format, read by content. One small
# gpt2 pair (with the shipped byte-level BPE tokenizer) is written natively, as a Hugging Face
# folder (by the independent tests/importers/hf_gpt2_write.py) and as GGUF (speclab's writer); one
# small llama as native, llama2.c and GGUF. Each command must give the same result whatever the
# format of its models: the weights are the same values, so the engine computes the same numbers
# (exact equality of tokens, logged distributions, bits per token, verification samples; the
# measured times are left out). Plus: a draft whose tokenizer differs from the target's is refused
# before any work, naming the first differing id; model info names each format.
set -u
. tests/cli/lib/cli_common.sh
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
TOK=models/tokenizer.json
cfg() { echo "{\"vocab_size\":4096,\"n_layer\":$1,\"n_head\":2,\"d_model\":$2,\"d_ff\":$((4 * $2)),\"max_seq_len\":128}"; }
"$S" model init --arch gpt2 --config "$(cfg 2 32)" --init-std 0.2 --seed 1 --tokenizer-json $TOK --out "$T/t.st" >/dev/null &&
  "$S" model init --arch gpt2 --config "$(cfg 1 16)" --init-std 0.2 --seed 2 --tokenizer-json $TOK --out "$T/d.st" >/dev/null &&
  "$S" model init --arch llama --config "$(cfg 2 32)" --init-std 0.2 --seed 3 --out "$T/l.st" >/dev/null ||
  { bad "model init"; exit 1; }
$PY tests/importers/hf_gpt2_write.py "$T/t.st" "$T/t.hf" --tokenizer json >/dev/null || bad "HF writer"
"$S" model convert "$T/t.st" "$T/t.gguf" --to gguf 2>/dev/null && "$S" model convert "$T/d.st" "$T/d.gguf" --to gguf 2>/dev/null &&
  "$S" model convert "$T/l.st" "$T/l.gguf" --to gguf 2>/dev/null && "$S" model convert "$T/l.st" "$T/l.bin" --to llama2c 2>/dev/null ||
  bad "model convert"
for f in t.st:speclab t.hf:hf-gpt2 t.gguf:gguf l.bin:llama2c l.gguf:gguf; do
  "$S" model info "$T/${f%%:*}" | grep -qx "format: ${f##*:}" && ok "model info: ${f%%:*} is ${f##*:}" || bad "model info ${f%%:*}"
done
head -3 data/prompts/prose.txt > "$T/p.txt"
printf '5 17 300 9\n42 43\n' > "$T/ids.txt"
PROMPT=$(head -1 data/prompts/code.txt)

# Each command on each gpt2 target format (and a GGUF draft), results compared with the native one.
for tgt in t.st t.hf t.gguf; do
  for dr in d.st d.gguf; do
    k="$tgt+$dr"
    "$S" generate --target "$T/$tgt" --draft "$T/$dr" --gamma 3 --prompt "$PROMPT" --tokens 12 --seed 4 \
      --tokens-out "$T/g.$k" >/dev/null 2>&1 || bad "generate $k"
    "$S" measure --target "$T/$tgt" --draft "$T/$dr" --prompts "$T/p.txt" --tokens 10 --out "$T/m.$k.h5" --quiet \
      >/dev/null 2>&1 || bad "measure $k"
    "$S" run --target "$T/$tgt" --draft "$T/$dr" --prompts "$T/p.txt" --tokens 10 --gamma 2 --cost-reps 1 --boot 0 \
      --out "$T/r.$k.h5" --tokens-out "$T/r.$k" --quiet >/dev/null 2>&1 || bad "run $k"
    "$S" verify --target "$T/$tgt" --draft "$T/$dr" --prompt "$PROMPT" --samples 30 --tokens 3 --gamma 2 --seed 5 \
      --samples-out "$T/v.$k" --quiet >/dev/null 2>&1
    [ $? -le 1 ] || bad "verify $k"
  done
  "$S" tokenize encode --tokenizer "$T/$tgt" --in data/prompts/prose.txt --out "$T/e.$tgt.tok" 2>/dev/null || bad "tokenize $tgt"
  "$S" eval --model "$T/$tgt" --tokens "$T/e.t.st.tok" --context 64 --format csv > "$T/ev.$tgt" 2>/dev/null || bad "eval $tgt"
done
same() { # NAME FILE...: every file equals the first
  local name=$1 a=$2; shift 2
  for b in "$@"; do cmp -s "$a" "$b" || { bad "$name: $(basename "$b") differs from $(basename "$a")"; return; }; done
  ok "$name: identical across formats ($(($# + 1)) runs)"
}
same "generate tokens" "$T"/g.t.st+d.st "$T"/g.t.hf+* "$T"/g.t.gguf+* "$T"/g.t.st+d.gguf
same "run tokens" "$T"/r.t.st+d.st "$T"/r.t.hf+d.st "$T"/r.t.hf+d.gguf "$T"/r.t.gguf+d.st "$T"/r.t.gguf+d.gguf "$T"/r.t.st+d.gguf
same "verify samples" "$T"/v.t.st+d.st "$T"/v.t.hf+d.st "$T"/v.t.hf+d.gguf "$T"/v.t.gguf+d.st "$T"/v.t.gguf+d.gguf "$T"/v.t.st+d.gguf
same "tokenize encode" "$T"/e.t.st.tok "$T"/e.t.hf.tok "$T"/e.t.gguf.tok
$PY - "$T" <<'PY' && ok "measure: logged p and q identical across formats" || bad "measure logs differ"
import glob, sys, h5py, numpy as np
logs = sorted(glob.glob(sys.argv[1] + "/m.*.h5"))
assert len(logs) == 6, logs
ref = h5py.File(logs[0], "r")
for f in logs[1:]:
    g = h5py.File(f, "r")
    for k in ("distributions/p", "distributions/q", "positions/token"):
        assert np.array_equal(ref[k][:], g[k][:]), (f, k)
PY
for f in t.st t.hf t.gguf; do cut -d, -f1 --complement "$T/ev.$f" > "$T/ev.$f.cut"; done  # all but the model's path
same "eval (bits per token)" "$T/ev.t.st.cut" "$T/ev.t.hf.cut" "$T/ev.t.gguf.cut"

# The llama: native, llama2.c and GGUF, prompts as token ids (no tokenizer).
for m in l.st l.bin l.gguf; do
  "$S" generate --autoregressive --target "$T/$m" --prompt-ids 5,17,300 --tokens 16 --seed 6 --tokens-out "$T/la.$m" \
    >/dev/null 2>&1 || bad "generate --autoregressive $m"
  "$S" run --target "$T/$m" --draft "$T/l.st" --prompt-ids "$T/ids.txt" --tokens 10 --gamma 2 --temperature 0 \
    --cost-reps 1 --boot 0 --out "$T/lr.$m.h5" --tokens-out "$T/lr.$m" --quiet >/dev/null 2>&1 || bad "run --prompt-ids $m"
done
same "llama generate (llama2.c, GGUF)" "$T/la.l.st" "$T/la.l.bin" "$T/la.l.gguf"
same "llama run --prompt-ids (llama2.c, GGUF)" "$T/lr.l.st" "$T/lr.l.bin" "$T/lr.l.gguf"

# A draft with another tokenizer: ids 300 and 301 swapped, as a GGUF file. Refused before any work.
$PY - "$TOK" "$T/tok2.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["vocab"][300], t["vocab"][301] = t["vocab"][301], t["vocab"][300]
json.dump(t, open(sys.argv[2], "w"))
PY
"$S" model init --arch gpt2 --config "$(cfg 1 16)" --seed 2 --tokenizer-json "$T/tok2.json" --out "$T/x.st" >/dev/null &&
  "$S" model convert "$T/x.st" "$T/x.gguf" --to gguf 2>/dev/null || bad "mismatched draft"
expect_2 "pair: draft tokenizer differs (run)" "differ first at id 300" run --target "$T/t.hf" --draft "$T/x.gguf" \
  --prompts "$T/p.txt" --tokens 4 --gamma 2 --out "$T/no.h5"
[ ! -e "$T/no.h5" ] && ok "pair: nothing written" || bad "pair: a log was written"
expect_2 "pair: draft tokenizer differs (measure)" "differ first at id 300" measure --target "$T/t.gguf" --draft "$T/x.gguf" \
  --prompts "$T/p.txt" --tokens 4 --out "$T/no2.h5"
expect_2 "pair: draft tokenizer differs (generate)" "differ first at id 300" generate --target "$T/t.st" --draft "$T/x.gguf" \
  --gamma 2 --prompt-ids 1,2 --tokens 4

# model convert --dtype to the native format: f32 -> f16 -> f32 stores the f16 values exactly
# (f16 -> f32 is exact), so the f32 file's distributions equal the f16 file's bit for bit, and
# converting the f16 file to f16 again gives identical tensor bytes; the matrices change type, the
# vectors (norms, biases) keep theirs. Checked by numpy on the safetensors files.
"$S" model convert "$T/t.st" "$T/t16.st" --dtype f16 >/dev/null 2>&1 &&
  "$S" model convert "$T/t16.st" "$T/t32.st" --dtype f32 >/dev/null 2>&1 &&
  "$S" model convert "$T/t32.st" "$T/t16b.st" --dtype f16 >/dev/null 2>&1 || bad "model convert --dtype"
"$S" model probs "$T/t16.st" --prompt-ids 5,17,300 --top 5 > "$T/pr16" 2>&1 &&
  "$S" model probs "$T/t32.st" --prompt-ids 5,17,300 --top 5 > "$T/pr32" 2>&1 &&
  cmp -s "$T/pr16" "$T/pr32" && ok "model convert --dtype f32 of an f16 model: same distributions" ||
  bad "model convert --dtype: distributions differ"
$PY - "$T/t.st" "$T/t16.st" "$T/t32.st" "$T/t16b.st" <<'PY' && ok "model convert --dtype: matrices converted (numpy), vectors kept" || bad "model convert --dtype tensors"
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); base = 8 + n
    return {k: (v["dtype"], np.frombuffer(b[base + v["data_offsets"][0]:base + v["data_offsets"][1]],
            {"F32": np.float32, "F16": np.float16}[v["dtype"]]).reshape(v["shape"])) for k, v in h.items() if k != "__metadata__"}
a, h16, h32, h16b = (load(p) for p in sys.argv[1:])
for k, (dt, x) in a.items():
    want = "F16" if x.ndim == 2 else dt
    assert h16[k][0] == want and np.array_equal(h16[k][1], x.astype(np.float16) if x.ndim == 2 else x), k
    assert h32[k][0] == ("F32" if x.ndim == 2 else dt) and np.array_equal(h32[k][1].astype(h16[k][1].dtype), h16[k][1]), k
    assert h16b[k][0] == h16[k][0] and h16b[k][1].tobytes() == h16[k][1].tobytes(), k
PY
expect_2 "model convert --dtype i32" "unknown dtype 'i32'" model convert "$T/t.st" "$T/no.st" --dtype i32

[ $fail -eq 0 ] && echo "importers_commands.sh: all checks passed"
exit $fail
