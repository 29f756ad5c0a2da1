#!/usr/bin/env bash
# make demo: the main job. Grows with each issue; each step says what it shows.
set -euo pipefail
S=${SPECLAB:-build/speclab}
echo "== speclab demo =="
"$S" --help

echo
echo "== theory: expected tokens, walltime and operation factors (Theorems 3.8, 3.11), c = 0.05 =="
"$S" theory --alpha 0.5:0.9:0.1 --gamma 1:8 --c 0.05
echo
echo "== theory: optimal gamma for each alpha and c in {0, 0.01, 0.05, 0.1} (gamma_opt 0 = do not speculate) =="
echo "(the text table, narrowed to a few columns by name; ops_factor is at the best gamma)"
"$S" theory --alpha 0.5:0.95:0.05 --optimal --c 0,0.01,0.05,0.1 |
  awk 'NR == 1 { print; next }
       NR == 2 { for (i = 1; i <= NF; i++) col[$i] = i }
       { printf "%6s %6s %9s %19s %10s %9s %6s  %s\n", $col["alpha"], $col["c"], $col["gamma_opt"],
         $col["walltime_factor_opt"], $col["ops_factor"], $col["gamma_cap"], $col["at_cap"], $col["ties"] }'
echo
echo "== mc: Monte Carlo of Algorithm 1 on a noisy pair next to the theory (CIs at 95%) =="
"$S" mc --family noisy --vocab 1000 --gamma 4 --iterations 200000 --c 0.05 --c-hat 0.02
echo
echo "== verify: the exact rule passes, a wrong variant (resample from p after a rejection) does not =="
out=$("$S" verify)
printf '%s\n' "$out" | sed -n 1,3p
out=$("$S" verify --rule bug-resample-from-p 2>&1 || true)
printf '%s\n' "$out" | sed -n 1,4p

echo
echo "== measure: a synthetic target/draft pair logged to HDF5 (crash-safe shards, resumable) =="
D=$(mktemp -d)
"$S" measure --synthetic noisy --vocab 2000 --noise 0.8 --sequences 24 --tokens 96 --out "$D/m.h5"
echo
echo "== analyze: alpha with a bootstrap CI over sequences, acceptance per position, lenience, policies =="
"$S" analyze "$D/m.h5" --c 0.05 --gamma-max 8 > "$D/report.txt"
for sec in summary acceptance_by_position expected_tokens lenience other_rules optimal_gamma; do
  awk -v s="# $sec" '$0 == s { on = 1 } on && /^$/ { exit } on' "$D/report.txt"; echo
done
awk '$0 == "# dynamic_gamma" { on = 1 } on && /^$/ { exit } on && (++k <= 2 || $1 == "0.05")' "$D/report.txt"
echo
echo "== recommend: the gamma to deploy at c = 0.05, its speedup CI, latency of a 128-token answer =="
"$S" recommend "$D/m.h5" --c 0.05
rm -rf "$D"
echo
echo "== generate: speculative decoding with real (random-weight) models; a model drafting for itself accepts everything =="
T=$(mktemp -d)
"$S" model init --arch llama --config '{"vocab_size":4096,"n_layer":2,"n_head":4,"n_kv_head":2,"d_model":64,"d_ff":192,"max_seq_len":256}' \
  --seed 1 --init-std 0.1 --tokenizer-json models/tokenizer.json --out "$T/target.st"
"$S" model init --arch llama --config '{"vocab_size":4096,"n_layer":1,"n_head":4,"n_kv_head":2,"d_model":64,"d_ff":192,"max_seq_len":256}' \
  --seed 2 --init-std 0.1 --tokenizer-json models/tokenizer.json --out "$T/draft.st"
"$S" model info "$T/target.st" | sed -n 1,12p
"$S" generate --target "$T/target.st" --draft "$T/draft.st" --gamma 4 --prompt "int main(void)" --tokens 32 --seed 1
"$S" generate --target "$T/target.st" --draft "$T/target.st" --gamma 4 --prompt "int main(void)" --tokens 32 --seed 1 | tail -2
rm -rf "$T"

echo
echo "== the shipped family: the 27.4M-parameter target with its distilled 0.95M draft, real speculative decoding =="
"$S" generate --target models/family/target.safetensors --draft models/family/draft-s-distilled.safetensors \
  --gamma 4 --prompt "In the beginning" --tokens 48 --seed 1
echo
echo "== measure + analyze on the shipped family: alpha of the distilled draft on 8 prose prompts =="
F=$(mktemp -d)
head -n 8 data/prompts/prose.txt > "$F/prompts.txt"
"$S" measure --target models/family/target.safetensors --draft models/family/draft-s-distilled.safetensors \
  --prompts "$F/prompts.txt" --tokens 64 --seed 1 --out "$F/family.h5" >/dev/null
"$S" analyze "$F/family.h5" --c 0.05 --gamma-max 8 > "$F/report.txt"
awk '$0 == "# summary" { on = 1 } on && /^$/ { exit } on' "$F/report.txt"
rm -rf "$F"
