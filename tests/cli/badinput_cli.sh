#!/usr/bin/env bash
# badinput_cli.sh: bad-input rows of tests/BAD_INPUT.md (the README's "Bad input" section) that no other CLI test covers at
# the command line (the unit tests check the same readers as library calls): prompt files, token
# files with a wrong magic, safetensors headers whose length runs past the file, and malformed
# flags (ranges, lists, numbers, enumerations, missing values). Each: exit 2, exactly one line on
# stderr naming the problem (expect_2), and no output file left behind.
set -u
. "$(dirname "$0")/lib/cli_common.sh"
export OPENBLAS_NUM_THREADS=1
cfg() { echo "{\"vocab_size\":$1,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":$2}"; }
"$S" model init --arch gpt2 --config "$(cfg 4096 32)" --out "$T/t.st" --tokenizer-json models/tokenizer.json >/dev/null \
  || { bad "model init"; exit 1; }
RUN=(run --target "$T/t.st" --draft "$T/t.st" --tokens 4 --gamma 2 --quiet --out "$T/o.h5")

# ---- prompt files (data/prompts format: one prompt a line, \n \t \r \\ escapes, UTF-8) ----
printf 'x\\q\n' >"$T/esc.txt"; : >"$T/empty.txt"; printf 'caf\xe9\n' >"$T/latin1.txt"; printf 'ok\n\nafter\n' >"$T/gap.txt"
expect_2 "prompts: bad escape" "esc.txt:1: bad escape at column 3" "${RUN[@]}" --prompts "$T/esc.txt"
expect_2 "prompts: empty file" "empty.txt: no prompts" "${RUN[@]}" --prompts "$T/empty.txt"
expect_2 "prompts: not UTF-8" "latin1.txt:1: not valid UTF-8" "${RUN[@]}" --prompts "$T/latin1.txt"
expect_2 "prompts: empty line" "gap.txt:2: empty prompt" "${RUN[@]}" --prompts "$T/gap.txt"
expect_2 "prompts: missing file" "cannot read prompts .*none.txt" "${RUN[@]}" --prompts "$T/none.txt"
expect_2 "measure prompts: bad escape" "esc.txt:1: bad escape" measure --target "$T/t.st" --draft "$T/t.st" \
  --prompts "$T/esc.txt" --tokens 2 --out "$T/o.h5" --quiet
[ ! -e "$T/o.h5" ] && ok "prompts: no log written" || bad "prompts: a log was written"

# ---- token files (models/TOKFILE.md) ----
{ printf 'XLTOK\0\0\1'; head -c 30 /dev/zero; } >"$T/magic.tok"
expect_2 "token file: wrong magic" "magic.tok: not a token file (expected magic" eval --model "$T/t.st" --tokens "$T/magic.tok"

# ---- safetensors: a header length past the end of the file ----
/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<Q', 1 << 60) + b'{}')" "$T/hl.st"
expect_2 "model file: header length 2^60" "hl.st: truncated or corrupt: header length 1152921504606846976 runs past the end" \
  model info "$T/hl.st"
printf '\x10\0\0\0\0\0\0\0{"a":1}' >"$T/short.st"
expect_2 "model file: header length 16 in a 15-byte file" "short.st: truncated or corrupt" model info "$T/short.st"
: >"$T/zero.st"
expect_2 "model file: empty" "zero.st" model info "$T/zero.st"

# ---- flags ----
printf 'one prompt\n' >"$T/p.txt"
expect_2 "flags: backwards range" "the range 5:2 in '5:2' runs backwards" run --target "$T/t.st" --draft "$T/t.st" \
  --prompts "$T/p.txt" --tokens 4 --gamma 5:2 --out "$T/o.h5"
expect_2 "flags: empty list item" "'1,,2' is not a list" run --target "$T/t.st" --draft "$T/t.st" \
  --prompts "$T/p.txt" --tokens 4 --gamma 1,,2 --out "$T/o.h5"
expect_2 "flags: gamma 65" "gamma" run --target "$T/t.st" --draft "$T/t.st" --prompts "$T/p.txt" --tokens 4 --gamma 65 --out "$T/o.h5"
expect_2 "flags: not a number in a range" "'x' is not a finite number" theory --alpha 0.5 --gamma 1:x
expect_2 "flags: probability above 1" "--alpha: 1.5 is outside \[0, 1\]" theory --alpha 1.5 --gamma 2
expect_2 "flags: negative count" "--iterations: -5 is outside" mc --family noisy --iterations -5
expect_2 "flags: count not an integer" "--iterations: '1e99' is not an integer" mc --family noisy --iterations 1e99
expect_2 "flags: integer overflow" "--tokens: '99999999999999999999' is not an integer" generate --target "$T/t.st" \
  --autoregressive --prompt-ids 1 --tokens 99999999999999999999
expect_2 "flags: bad seed" "--seed: 'abc'" mc --family noisy --seed abc
expect_2 "flags: unknown enumeration value" "--family: 'bogus', expected identical|noisy" mc --family bogus
expect_2 "flags: unknown format" "--format: 'xml' is not one of table, csv, json" verify --family noisy --format xml
expect_2 "flags: missing value" "option '--alpha' needs a value" theory --alpha
expect_2 "flags: unknown option" "unknown option '--bogus'" mc --bogus
expect_2 "flags: unknown command" "bogus" bogus
expect_2 "flags: missing file argument" "give one log file" analyze
[ ! -e "$T/o.h5" ] && ok "flags: no log written" || bad "flags: a log was written"

[ $fail -eq 0 ] && echo "badinput_cli.sh: all checks passed"
exit $fail
