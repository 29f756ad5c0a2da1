#!/usr/bin/env bash
# tests/golden/capture.sh OUTDIR: runs a fixed set of deterministic commands (every experiment, each
# output format) and writes their outputs to OUTDIR, one file per command. A refactor that must not
# change behaviour is checked by capturing before and after and diffing the folders:
#   bash tests/golden/capture.sh /tmp/before; ...; bash tests/golden/capture.sh /tmp/after
#   diff -r /tmp/before /tmp/after
# Timed quantities (run's seconds, speedups, c, v(n)) vary between runs; they are dropped by
# tests/golden/untimed.py after writing, every count, estimate and token id is kept.
set -u
S=${SPECLAB:-build/speclab}
O=${1:?usage: capture.sh OUTDIR}
mkdir -p "$O"
W=/tmp/sl_golden_work   # a fixed path: file names appear in the outputs
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
n=0
cap() { # cap NAME CMD...: stdout + stderr + exit code
  local name=$1; shift
  { "$@" 2>&1; echo "exit=$?"; } > "$O/$name.txt"
  n=$((n + 1))
}
for f in table csv json; do
  cap theory_grid_$f "$S" theory --alpha 0.5:0.9:0.1 --gamma 1:8 --c 0.05 --c-hat 0.02 --format $f
  cap theory_opt_$f "$S" theory --alpha 0.5:0.95:0.05 --optimal --c 0,0.01,0.05,0.1 --format $f
  cap theory_beta_$f "$S" theory --beta 0.9,0.8,0.7 --c 0.05 --v-linear 0.1 --format $f
  cap dist_$f "$S" dist --p 0.5,0.3,0.2 --q 0.2,0.3,0.5 --format $f
  cap mc_$f "$S" mc --family noisy --vocab 64 --gamma 4 --iterations 20000 --c 0.05 --c-hat 0.02 --format $f
  cap mc_pos_$f "$S" mc --family positional --gamma 3 --noise 0.3 --iterations 20000 --v-slope 0.05 --format $f
  cap verify_$f "$S" verify --iterations 20000 --format $f
  cap verify_bug_$f "$S" verify --iterations 20000 --rule bug-resample-from-p --format $f
done
cap theory_single_json "$S" theory --alpha 0.8 --gamma 4 --c 0.05 --c-hat 0.02 --format json
cap theory_vtable "$S" theory --alpha 0.7 --optimal --c 0.05 --v-table 2:1.02,3:1.05,4:1.1,5:1.2
cap theory_bad "$S" theory --alpha 1.5 --gamma 4
cap verify_two "$S" verify --iterations 20000 --two-sample
cap verify_power "$S" verify --power --tv 0.01 --df 7 --level 1.25e-7
cap verify_repl "$S" verify --replications 20 --iterations 500 --vocab 4 --gamma 2
cap measure "$S" measure --synthetic noisy --vocab 512 --noise 0.8 --sequences 12 --tokens 64 --out "$W/m.h5"
cap measure16 "$S" measure --synthetic tempered --vocab 300 --draft-temperature 1.5 --temperature 0.7 --top-p 0.9 \
  --dist float16 --sequences 6 --tokens 40 --out "$W/m16.h5"
for f in table csv json; do
  cap analyze_$f "$S" analyze "$W/m.h5" --c 0.05 --gamma-max 8 --format $f
  cap analyze16_$f "$S" analyze "$W/m16.h5" --gamma-max 6 --v-linear 0.02 --format $f
  cap recommend_$f "$S" recommend "$W/m.h5" --c 0.05 --format $f
done
cap validate "$S" analyze --validate "$W/m.h5"
T="$W/t.st"; D="$W/d.st"
cfg() { echo "{\"vocab_size\":4096,\"n_layer\":$1,\"n_head\":4,\"d_model\":$2,\"d_ff\":$((4 * $2)),\"max_seq_len\":256}"; }
cap init_t "$S" model init --arch gpt2 --config "$(cfg 2 64)" --init-std 0.2 --out "$T" --seed 1 --tokenizer-json models/tokenizer.json
cap init_d "$S" model init --arch gpt2 --config "$(cfg 1 32)" --init-std 0.2 --out "$D" --seed 2
cap model_info "$S" model info "$T"
cap model_info_json "$S" model info "$T" --format json
cap generate "$S" generate --target "$T" --draft "$D" --gamma 4 --prompt "int main(void)" --tokens 32 --seed 1
head -4 data/prompts/prose.txt > "$W/p.txt"
cap measure_models "$S" measure --target "$T" --draft "$D" --prompts "$W/p.txt" --tokens 24 --out "$W/mm.h5"
cap run_json "$S" run --target "$T" --draft "$D" --prompts "$W/p.txt" --tokens 24 --gamma 3 --cost-reps 2 --boot 200 \
  --out "$W/run.h5" --tokens-out "$W/run.tok" --format json
cp "$W/run.tok" "$O/run_tokens.txt"
cap run_table "$S" run --target "$T" --draft "$D" --prompts "$W/p.txt" --tokens 24 --gamma 3 --cost-reps 2 --boot 200 \
  --out "$W/run2.h5"
for f in table json; do
  cap analyze_run_$f "$S" analyze "$W/run.h5" --format $f
  cap recommend_run_$f "$S" recommend "$W/run.h5" --format $f
  cap analyze_with_run_$f "$S" analyze "$W/mm.h5" --run "$W/run.h5" --format $f
done
cap analyze_models "$S" analyze "$W/mm.h5" --gamma-max 6
"$S" tokenize encode --tokenizer models/tokenizer.json --in data/prompts/prose.txt --out "$W/p.tok" >/dev/null
cap eval "$S" eval --model "$T" --tokens "$W/p.tok"
cap demo bash sim/demo.sh
/usr/bin/python3 "$(dirname "$0")/untimed.py" "$O"/*.txt
echo "capture.sh: $n outputs (+ run, analyze/recommend of the run log) in $O"
