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
