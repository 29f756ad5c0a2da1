#!/usr/bin/env bash
# drafts_badinput.sh: bad input to the non-transformer drafts, sl_lm_open and `speclab eval`:
# exit 2, exactly one line on stderr naming the problem, no output file left behind.
set -u
. "$(dirname "$0")/lib/cli_common.sh"

/usr/bin/python3 - "$T" <<'PY'
import struct, sys
t = sys.argv[1]
def w(path, ids, V):
    with open(path, "wb") as f:
        f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", V, 2, len(ids)) + struct.pack("<%dH" % len(ids), *ids))
w(t + "/a.tok", [i * 7 % 50 for i in range(400)], 300)
w(t + "/v64.tok", [i % 64 for i in range(400)], 64)
w(t + "/empty.tok", [], 300)
w(t + "/one.tok", [5], 300)
PY
NV=$(/usr/bin/python3 -c "import json; print(len(json.load(open('models/tokenizer.json'))['vocab']))")
"$S" model ngram --train "$T/a.tok" --order 2 --vocab 300 --out "$T/bi.st" >/dev/null || bad "bigram training"
"$S" model init --arch gpt2 --config '{"vocab_size":300,"n_layer":1,"n_head":2,"d_model":16,"d_ff":32,"max_seq_len":32}' --out "$T/g300.st" || bad "model init"
"$S" model init --arch gpt2 --config '{"vocab_size":64,"n_layer":1,"n_head":2,"d_model":16,"d_ff":32,"max_seq_len":32}' --out "$T/g64.st" || bad "model init"

# model ngram: same input, same bytes
"$S" model ngram --train "$T/a.tok" --order 2 --vocab 300 --out "$T/bi2.st" >/dev/null || bad "bigram training"
cmp -s "$T/bi.st" "$T/bi2.st" && ok "n-gram training is deterministic (same bytes)" || bad "two trainings differ"
expect_2 "token file vocabulary differs from the tokenizer" "vocabulary mismatch" model ngram --train "$T/a.tok" --order 2 --tokenizer models/tokenizer.json --out "$T/x.st"
expect_2 "token file vocabulary differs from --vocab" "vocabulary mismatch" model ngram --train "$T/a.tok" "$T/v64.tok" --order 1 --vocab 300 --out "$T/x.st"
expect_2 "empty token file" "holds no tokens" model ngram --train "$T/empty.tok" --order 1 --vocab 300 --out "$T/x.st"
expect_2 "order 3" "order" model ngram --train "$T/a.tok" --order 3 --vocab 300 --out "$T/x.st"
expect_2 "addk for a bigram" "smoothing" model ngram --train "$T/a.tok" --order 2 --smoothing addk --vocab 300 --out "$T/x.st"
expect_2 "unknown smoothing" "smoothing" model ngram --train "$T/a.tok" --order 2 --smoothing wb --vocab 300 --out "$T/x.st"
expect_2 "discount above 1" "discount" model ngram --train "$T/a.tok" --order 2 --discount 1.5 --vocab 300 --out "$T/x.st"
expect_2 "unwritable output" "cannot\|No such" model ngram --train "$T/a.tok" --order 1 --vocab 300 --out /nonexistent/dir/x.st
[ ! -e "$T/x.st" ] && ok "nothing written on bad input" || bad "an output appeared on bad input"

# corrupt n-gram files: same-length edits of the header and of the data
/usr/bin/python3 - "$T" <<'PY'
import json, struct, sys
t = sys.argv[1]
b = bytearray(open(t + "/bi.st", "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); base = 8 + n
def save(name, data): open(t + "/" + name, "wb").write(bytes(data))
save("trunc.st", b[:len(b) // 2])
c = bytearray(b); s = h["bigram.col"]["data_offsets"][0]; c[base + s:base + s + 4] = struct.pack("<i", 9999); save("badcol.st", c)
c = bytearray(b); s = h["bigram.count"]["data_offsets"][0]; c[base + s:base + s + 4] = struct.pack("<i", 0); save("badcnt.st", c)
c = bytearray(b); s = h["unigram.count"]["data_offsets"][0]; c[base + s:base + s + 4] = struct.pack("<i", 123456); save("badsum.st", c)
c = bytearray(b); s = h["bigram.row_ptr"]["data_offsets"][0]; c[base + s + 4:base + s + 8] = struct.pack("<i", 10**6); save("badptr.st", c)
save("badcfg.st", b.replace(b'"order\\":2', b'"order\\":7', 1) if b'"order\\":2' in b else b.replace(b'order', b'ordxr', 1))
PY
expect_2 "truncated n-gram file" "bi.st\|trunc.st" eval --model "$T/trunc.st" --tokens "$T/a.tok"
expect_2 "column out of range" "bigram.col" eval --model "$T/badcol.st" --tokens "$T/a.tok"
expect_2 "zero bigram count" "bigram.count" eval --model "$T/badcnt.st" --tokens "$T/a.tok"
expect_2 "unigram counts do not sum to n_tokens" "n_tokens" eval --model "$T/badsum.st" --tokens "$T/a.tok"
expect_2 "row pointers out of order" "row_ptr" eval --model "$T/badptr.st" --tokens "$T/a.tok"
expect_2 "bad config" "order" eval --model "$T/badcfg.st" --tokens "$T/a.tok"

# lookup files
"$S" model lookup --n 2 --epsilon 0.2 --fallback "$T/bi.st" --out "$T/lk.st" || bad "model lookup"
/usr/bin/python3 -c "
import re, sys
b = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(re.sub(rb'epsilon\\\\\":[0-9.]+', lambda m: b'epsilon\\\\\":0' + b' ' * (len(m.group(0)) - 11), b, count=1))
" "$T/lk.st" "$T/lkbad.st"
cmp -s "$T/lk.st" "$T/lkbad.st" && bad "the lookup corruption did not apply"
expect_2 "lookup file with epsilon 0" "epsilon" eval --model "$T/lkbad.st" --tokens "$T/a.tok"
expect_2 "model lookup: n out of range" "\-\-n" model lookup --n 0 --fallback "$T/bi.st" --out "$T/x.st"
expect_2 "model lookup: fallback not an n-gram file" "not ngram or lookup" model lookup --n 2 --fallback "$T/g300.st" --out "$T/x.st"

# sl_lm_open through eval, generate and measure
expect_2 "unknown spec" "unknown model spec" eval --model "nosuch:3" --tokens "$T/a.tok"
expect_2 "lookup with bad N" "lookup:N" eval --model "lookup:0" --tokens "$T/a.tok"
expect_2 "lookup with bad epsilon" "epsilon" eval --model "lookup:3:1.5" --tokens "$T/a.tok"
expect_2 "lookup with a missing fallback" "cannot open\|nofile" eval --model "lookup:3:0.1:$T/nofile.st" --tokens "$T/a.tok"
expect_2 "eval: token file vs model vocabulary" "vocabulary mismatch" eval --model "$T/bi.st" --tokens "$T/v64.tok"
expect_2 "eval: transformer vocabulary" "vocabulary mismatch" eval --model "$T/g64.st" --tokens "$T/a.tok"
expect_2 "eval: empty token file" "at least 2" eval --model "$T/bi.st" --tokens "$T/empty.tok"
expect_2 "eval: one token" "at least 2" eval --model "$T/bi.st" --tokens "$T/one.tok"
expect_2 "eval: context beyond the model's" "exceeds the context" eval --model "$T/g300.st" --tokens "$T/a.tok" --context 64
expect_2 "eval: --text and --bytes" "at most one" eval --model "$T/bi.st" --tokens "$T/a.tok" --bytes 10 --text "$T/a.tok"
expect_2 "eval: missing text" "cannot read" eval --model "$T/bi.st" --tokens "$T/a.tok" --text "$T/none.txt"
expect_2 "generate: n-gram draft vocabulary" "vocabulary mismatch" generate --target "$T/g64.st" --draft "$T/bi.st" --gamma 2 --prompt-ids 1,2 --tokens 5
expect_2 "generate: unknown draft spec" "unknown model spec" generate --target "$T/g300.st" --draft "lookahead:3" --gamma 2 --prompt-ids 1,2 --tokens 5
expect_2 "generate: lookup target without a vocabulary" "needs a vocabulary" generate --target "lookup:2" --draft "$T/bi.st" --gamma 2 --prompt-ids 1,2 --tokens 5

# every draft kind works in generate and measure
for d in "$T/bi.st" "lookup:2" "lookup:3:0.2:$T/bi.st" "$T/lk.st"; do
  "$S" generate --target "$T/g300.st" --draft "$d" --gamma 3 --prompt-ids 1,2,3 --tokens 10 --format csv >"$T/out" 2>"$T/err" \
    && ok "generate with draft $d" || bad "generate with draft $d: $(cat "$T/err")"
done
"$S" generate --target "$T/bi.st" --draft "lookup:2" --gamma 3 --prompt-ids 1,2,3 --tokens 10 >/dev/null 2>"$T/err" \
  && ok "generate with an n-gram target" || bad "n-gram target: $(cat "$T/err")"
exit $fail
