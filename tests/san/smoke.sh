#!/usr/bin/env bash
# tests/san/smoke.sh: one invocation of every speclab command (and every verify mode) on tiny
# inputs, each checked for its exit code. tests/san/run.sh runs it with the ASan+UBSan binary and
# tests/san/valgrind.sh under valgrind memcheck: the point is the memory checker's verdict on code
# paths that load, compute, write and free, not the values (the other CLI tests check those).
# WRAP (an array, e.g. valgrind and its options) is put before every speclab call.
# Usage: SPECLAB=... [SMOKE_LIGHT=1] bash tests/san/smoke.sh [WRAPPER ARGS...]
set -u
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
WRAP=("$@")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
PY=/usr/bin/python3
fail=0
n=0
# expect RC NAME ARGS...: speclab ARGS exits RC (stdout to $T/out, stderr to $T/err).
expect() {
  local want=$1 name=$2; shift 2
  n=$((n + 1))
  local t0=$EPOCHREALTIME
  "${WRAP[@]}" "$S" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  local dt; dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq "$want" ]; then echo "ok   $name (${dt} s)"
  else echo "FAIL $name: exit $rc, wanted $want"; head -40 "$T/err"; fail=1; fi
}

# heavy CMD...: skipped when SMOKE_LIGHT=1 (the valgrind pass of make test, where each call costs
# ~4 s before it does anything: training's ~9 s each, and leaves whose paths other calls take
# (error exits, a second plot, the closed-form power) would not fit the budget; the ASan pass
# runs them all).
heavy() { if [ "${SMOKE_LIGHT:-0}" = 1 ]; then echo "skip ${3:-} (SMOKE_LIGHT=1)"; else "$@"; fi; }
# plain CMD...: run without the wrapper when SMOKE_LIGHT=1: calls whose files later calls need, or
# whose code paths a wrapped call of the same command also takes (another model init, a second
# generate); the valgrind pass then checks the 21 calls that read files, run the engine and
# decode, at ~4-8 s each under memcheck. The ASan pass wraps them all.
plain() {
  if [ "${SMOKE_LIGHT:-0}" = 1 ]; then
    local saved=("${WRAP[@]}"); WRAP=(); "$@"; WRAP=("${saved[@]}")
  else "$@"; fi
}

TOK=models/tokenizer.json
cfg() { echo "{\"vocab_size\":$1,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":$2}"; }
printf 'The quick brown fox jumps over the lazy dog.\nSpeculative decoding drafts tokens.\n' >"$T/p.txt"
head -c 4000 data/prompts/prose.txt >"$T/corpus.txt"

# ---- theory, dist, mc, verify (synthetic modes) ----
plain expect 0 "theory" theory --alpha 0.8 --gamma 1:8 --format csv
plain expect 0 "dist" dist --p 0.5,0.3,0.2 --q 0.2,0.3,0.5 --format json
expect 0 "mc" mc --family noisy --iterations 2000 --format json
expect 0 "verify (synthetic, exact rule)" verify --family noisy --iterations 500 --format json
plain expect 0 "verify --exact" verify --family noisy --vocab 4 --gamma 2 --exact
heavy expect 0 "verify --power" verify --power --tv 0.05 --df 3
plain expect 0 "verify --replications" verify --replications 3 --iterations 500 --vocab 4 --gamma 2
$PY tests/external_sampler.py --vocab 4 --gamma 2 --iterations 2000 --seed 1 --bug none --out "$T/s.csv" \
  --p-out "$T/sp.txt" --q-out "$T/sq.txt" >/dev/null
expect 0 "verify --samples (CSV)" verify --samples "$T/s.csv" --p @"$T/sp.txt" --q @"$T/sq.txt" --gamma 2

# ---- tokenizer, models ----
plain expect 0 "tokenize train" tokenize train --corpus "$T/corpus.txt" --vocab-size 300 --out "$T/tok300.json"
expect 0 "tokenize encode" tokenize encode --tokenizer "$TOK" --in "$T/corpus.txt" --out "$T/c.tok"
plain expect 0 "tokenize decode" tokenize decode --tokenizer "$TOK" --in "$T/c.tok" --out "$T/c.txt"
cmp -s "$T/c.txt" "$T/corpus.txt" && echo "ok   tokenize round trip" || { echo "FAIL tokenize round trip"; fail=1; }
expect 0 "model init (target, with tokenizer)" model init --arch gpt2 --config "$(cfg 4096 64)" --init-std 0.2 \
  --out "$T/t.st" --seed 1 --tokenizer-json "$TOK"
plain expect 0 "model init (draft)" model init --arch gpt2 --config "$(cfg 4096 64)" --init-std 0.2 --out "$T/d.st" --seed 2
expect 0 "model info" model info "$T/t.st"
expect 0 "model ngram" model ngram --train "$T/c.tok" --order 2 --tokenizer "$TOK" --out "$T/bi.st"
plain expect 0 "model lookup" model lookup --n 2 --epsilon 0.2 --fallback "$T/bi.st" --out "$T/lk.st"
expect 0 "eval (transformer)" eval --model "$T/t.st" --tokens "$T/c.tok" --context 32 --windows 2
expect 0 "eval (lookup + n-gram)" eval --model "$T/lk.st" --tokens "$T/c.tok" --text "$T/corpus.txt"
heavy expect 0 "train (2 steps)" train --train "$T/c.tok" --valid "$T/c.tok" --config "$(cfg 4096 16)" --steps 2 \
  --batch 2 --seq 8 --eval-every 2 --eval-batches 1 --out "$T/tr.st"
heavy expect 0 "distill (1 step)" distill --train "$T/c.tok" --valid "$T/c.tok" --config "$(cfg 4096 16)" --steps 1 \
  --batch 2 --seq 8 --eval-every 1 --eval-batches 1 --teacher "$T/t.st" --objective kl --out "$T/ds.st"

# ---- generation, verify with models, run ----
expect 0 "generate (speculative)" generate --target "$T/t.st" --draft "$T/d.st" --gamma 3 --prompt "Hello" --tokens 8 \
  --tokens-out "$T/g.tok"
plain expect 0 "generate --autoregressive --samples" generate --autoregressive --target "$T/t.st" --prompt-ids 1,2 \
  --tokens 6 --samples 3 --threads 2 --tokens-out "$T/a.tok"
plain expect 0 "generate (lookup draft)" generate --target "$T/t.st" --draft lookup:2 --gamma 2 --prompt-ids 1,2,1,2 --tokens 6
expect 0 "verify --two-sample" verify --two-sample "$T/a.tok" "$T/a.tok" --permutations 50
# A vocabulary of 16: the tests' cost grows with the vocabulary, not what the memory checkers look at.
plain expect 0 "model init (V = 16 pair)" model init --arch gpt2 --config "$(cfg 16 32)" --init-std 0.2 --out "$T/t16.st" --seed 1
expect 0 "model init (V = 16 draft, f16)" model init --arch gpt2 --config "$(cfg 16 32)" --dtype f16 --out "$T/d16.st" --seed 2
expect 0 "verify --target --draft" verify --target "$T/t16.st" --draft "$T/d16.st" --prompt-ids 1,2 --quiet \
  --samples 100 --tokens 2 --gamma 2
# v(n) to n = 4 (what recommend --gamma-max 3 below needs) at a short context: the cost points
# are most of the command's time (103 s of valgrind's ~400 with the defaults, n to 16).
expect 0 "run --gamma 1,2" run --target "$T/t.st" --draft "$T/d.st" --prompts "$T/p.txt" --tokens 6 --gamma 1,2 \
  --cost-reps 2 --v-max 4 --cost-context 8 --boot 20 --out "$T/run.h5" --quiet

# ---- logs: measure, analyze, recommend, plot, export-notebook ----
plain expect 0 "measure (synthetic)" measure --synthetic noisy --vocab 64 --sequences 2 --tokens 10 --out "$T/m.h5"
expect 0 "measure (models)" measure --target "$T/t.st" --draft "$T/d.st" --prompts "$T/p.txt" --tokens 4 \
  --out "$T/mm.h5" --quiet
plain expect 0 "analyze --validate (run log)" analyze --validate "$T/run.h5"
expect 0 "analyze (measure log)" analyze "$T/m.h5" --format json
expect 0 "analyze (run log)" analyze "$T/run.h5"
plain expect 0 "recommend" recommend "$T/m.h5" --c 0.1
expect 0 "recommend (run log costs)" recommend "$T/mm.h5" --costs "$T/run.h5" --gamma-max 3
if command -v gnuplot >/dev/null; then
  heavy expect 0 "plot theory-speedup" plot theory-speedup -o "$T/f.png"
  expect 0 "plot lenience" plot lenience "$T/m.h5" -o "$T/l.svg"
fi
plain expect 0 "export-notebook" export-notebook "$T/m.h5" "$T/run.h5" -o "$T/nb.ipynb"

# ---- bad input: the error paths free what they built ----
head -c 3000 "$T/m.h5" >"$T/trunc.h5"
expect 2 "analyze a truncated log" analyze "$T/trunc.h5"
head -c 5000 "$T/t.st" >"$T/trunc.st"
expect 2 "generate with a truncated model" generate --target "$T/trunc.st" --autoregressive --prompt-ids 1 --tokens 2
heavy expect 2 "dist, p not summing to 1" dist --p 0.5,0.4 --q 0.5,0.5
heavy expect 2 "unknown option" theory --bogus
heavy expect 2 "measure over an existing file" measure --synthetic noisy --vocab 16 --sequences 1 --tokens 2 --out "$T/p.txt"

echo "smoke.sh: $n commands, $([ $fail -eq 0 ] && echo "all as expected" || echo "FAILURES")"
exit $fail
