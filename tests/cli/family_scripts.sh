#!/usr/bin/env bash
# The family's checking scripts on made-up inputs whose answers are known:
# models/family/distill_gain.py (paired alpha difference) against numpy computed here from the same
# logs, a draft against itself (difference exactly 0, CI [0, 0]), unpaired logs (exit 2, one line);
# models/family/check_order.py on an eval table in order (exit 0) and with one pair swapped, a
# distilled draft whose alpha CI reaches 0, and no distill_gain.csv (each exit 1 naming the failure);
# models/family/compare_weights.py on a model and itself, two seeds of one config (against numpy on
# the raw f16 values), and two configs (exit 2).
. "$(dirname "$0")/lib/cli_common.sh"
PY=/usr/bin/python3
D=models/family
# Two synthetic drafts of one target (same seed: the same target text), a third log with another seed.
for spec in twin:1.5:3 good:0.5:3 other:0.5:4; do
  IFS=: read -r name noise seed <<<"$spec"
  for dom in prose code; do for t in 1 0; do
    "$S" measure --synthetic noisy --noise "$noise" --vocab 64 --tokens 40 --sequences 12 --seed "$seed" \
      --temperature "$t" --dist none --out "$T/$name.$dom.t$t.h5" > /dev/null || bad "measure $spec"
  done; done
done
$PY $D/distill_gain.py "$T" twin "twin=x good=y" > "$T/gain.csv" && ok "distill_gain runs" || bad "distill_gain runs"
$PY - "$T" <<'PYEOF' && ok "distill_gain: alpha and paired difference equal numpy's; twin vs itself 0 [0, 0]" || bad "distill_gain values"
import csv, sys, h5py, numpy as np
d = sys.argv[1]
def per(p):
    f = h5py.File(p, "r")["positions"]
    s, b = f["sequence"][:], f["beta"][:]
    return np.array([b[s == k].mean() for k in range(s.max() + 1)])
rows = list(csv.DictReader(open(d + "/gain.csv")))
assert len(rows) == 8, len(rows)
for r in rows:
    a = per("%s/%s.%s.t%s.h5" % (d, r["model"], r["domain"], r["temperature"]))
    t = per("%s/twin.%s.t%s.h5" % (d, r["domain"], r["temperature"]))
    # 4 decimals in the CSV: agreement to 6e-5 (rounding), CI must hold the estimate
    assert abs(float(r["alpha"]) - a.mean()) < 6e-5 and abs(float(r["diff"]) - (a - t).mean()) < 6e-5, r
    assert float(r["alpha_lo"]) <= float(r["alpha"]) <= float(r["alpha_hi"]), r
    if r["model"] == "twin":
        assert float(r["diff"]) == float(r["diff_lo"]) == float(r["diff_hi"]) == 0, r
    else:  # noise 0.5 against 1.5: the better draft by a wide margin (about +0.3 at T = 1)
        assert float(r["diff_lo"]) > 0.05, r
PYEOF
for f in "$T"/other.*; do mv "$f" "${f/other/unpaired}"; done
$PY $D/distill_gain.py "$T" twin "twin=x unpaired=y" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q 'different target text' "$T/err" \
  && ok "distill_gain: unpaired logs exit 2" || bad "distill_gain unpaired (rc=$rc): $(cat "$T/err")"
echo garbage > "$T/twin.prose.t1.h5"
$PY $D/distill_gain.py "$T" twin "twin=x good=y" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "distill_gain: a non-HDF5 log exits 2" || bad "distill_gain garbage (rc=$rc): $(cat "$T/err")"

# check_order.py: a three-draft family with a distilled draft (shape of draft-b).
mkdir -p "$T/fam"
cat > "$T/fam/recipe.tsv" <<'R'
# test recipe
tgt	target	4	4	64	256	1e-3	1	2	10	-
draft-a	base	2	4	64	256	1e-3	2	2	10	-
draft-b	small	1	2	32	128	1e-3	3	2	10	-
draft-b-kl	distill	1	2	32	128	1e-3	3	2	9	tgt
draft-b-dist	finetune	1	2	32	128	1e-3	3	2	1	draft-b-kl
R
eval_csv() {  # values: tgt a b dist bigram unigram (bits per byte, same on both domains)
  echo "model,domain,params,bits_per_token,bits_per_byte"
  for d in prose code; do
    echo "tgt,$d,300,1,$1"; echo "draft-a,$d,200,1,$2"; echo "draft-b,$d,20,1,$3"; echo "draft-b-dist,$d,20,1,$4"
    echo "bigram,$d,,1,$5"; echo "unigram,$d,,1,$6"
  done
}
gain_csv() {  # diff_lo of the distilled draft
  echo "model,twin,domain,temperature,prompts,alpha,alpha_lo,alpha_hi,diff,diff_lo,diff_hi"
  for d in prose code; do echo "draft-b-dist,draft-b,$d,1,96,0.6,0.58,0.62,0.05,$1,0.07"; done
}
eval_csv 1.5 1.6 1.7 1.9 2.1 3.1 > "$T/fam/eval.csv"; gain_csv 0.03 > "$T/fam/distill_gain.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > "$T/out"; rc=$?
[ $rc -eq 0 ] && grep -q 'drafts span 10x' "$T/out" && [ "$(grep -c '^ok' "$T/out")" -eq 10 ] \
  && ok "check_order: a family in order passes (distilled judged on alpha, not its worse bits/byte)" || bad "check_order in order (rc=$rc)"
eval_csv 1.5 1.75 1.7 1.9 2.1 3.1 > "$T/fam/eval.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > "$T/out"; rc=$?
[ $rc -eq 1 ] && grep -q '^FAIL  prose  draft-a' "$T/out" && ok "check_order: a larger draft worse than a smaller one fails" || bad "check_order swapped (rc=$rc)"
eval_csv 1.5 1.6 1.7 1.9 2.1 3.1 > "$T/fam/eval.csv"; gain_csv -0.001 > "$T/fam/distill_gain.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > "$T/out"; rc=$?
[ $rc -eq 1 ] && grep -q '^FAIL  prose  draft-b-dist' "$T/out" && ok "check_order: a distillation gain whose CI reaches 0 fails" || bad "check_order gain (rc=$rc)"
rm "$T/fam/distill_gain.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > "$T/out"; rc=$?
[ $rc -eq 1 ] && grep -q 'distill_gain.csv absent' "$T/out" && ok "check_order: no distill_gain.csv fails" || bad "check_order absent (rc=$rc)"
gain_csv 0.03 | head -1 > "$T/fam/distill_gain.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > "$T/out"; rc=$?
[ $rc -eq 1 ] && grep -q 'draft-b-dist has no row' "$T/out" && ok "check_order: a distill_gain.csv without the distilled draft fails" || bad "check_order no rows (rc=$rc)"
{ gain_csv 0.03 | head -1; echo "draft-b-dist,draft-b,prose"; } > "$T/fam/distill_gain.csv"
$PY $D/check_order.py "$T/fam/eval.csv" "$T/fam/recipe.tsv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "check_order: a malformed distill_gain.csv exits 2" || bad "check_order malformed gain (rc=$rc): $(cat "$T/err")"
$PY $D/check_order.py "$T/fam/none.csv" "$T/fam/recipe.tsv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "check_order: a missing eval table exits 2" || bad "check_order missing (rc=$rc): $(cat "$T/err")"
$PY $D/eval_numpy.py no-such-model > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "eval_numpy: an unknown model exits 2" || bad "eval_numpy unknown (rc=$rc): $(cat "$T/err")"

# compare_weights.py
cfg='{"vocab_size":64,"n_layer":1,"n_head":2,"d_model":16,"d_ff":32,"max_seq_len":16}'
"$S" model init --arch gpt2 --config "$cfg" --seed 1 --dtype f16 --out "$T/w1.st" > /dev/null
"$S" model init --arch gpt2 --config "$cfg" --seed 2 --dtype f16 --out "$T/w2.st" > /dev/null
"$S" model init --arch gpt2 --config "${cfg/\"d_model\":16/\"d_model\":32}" --seed 1 --dtype f16 --out "$T/w3.st" > /dev/null
$PY $D/compare_weights.py "$T/w1.st" "$T/w1.st" > "$T/out" && head -1 "$T/out" | grep -q 'payload identical' \
  && [ "$(awk 'NR > 2 && $3 != "1.0000"' "$T/out" | wc -l)" -eq 0 ] && ok "compare_weights: a model against itself is identical" \
  || bad "compare_weights self: $(head -3 "$T/out")"
$PY $D/compare_weights.py "$T/w1.st" "$T/w2.st" > "$T/out" && head -1 "$T/out" | grep -q 'payload differs' \
  && $PY - "$T" <<'PYEOF' && ok "compare_weights: two seeds, identical shares and max |diff| equal numpy's" || bad "compare_weights seeds"
import json, struct, sys, numpy as np
d = sys.argv[1]
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    dt = {"F16": np.float16, "F32": np.float32}  # init writes matrices f16, vectors f32
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dt[v["dtype"]]).astype(float)
            for k, v in h.items() if k != "__metadata__"}
a, b = load(d + "/w1.st"), load(d + "/w2.st")
rows = {l.split()[0]: l.split() for l in open(d + "/out").read().splitlines()[2:]}
assert sorted(rows) == sorted(a)
for k in a:  # printed with 4 decimals / 4 significant digits
    assert abs(float(rows[k][2]) - (a[k] == b[k]).mean()) < 1e-4, k
    assert abs(float(rows[k][3]) - np.abs(a[k] - b[k]).max()) <= 1e-3 * np.abs(a[k] - b[k]).max() + 1e-300, k
PYEOF
$PY $D/compare_weights.py "$T/w1.st" "$T/w3.st" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "compare_weights: different shapes exit 2" || bad "compare_weights shapes (rc=$rc): $(cat "$T/err")"
printf 'garbage' > "$T/w4.st"
$PY $D/compare_weights.py "$T/w1.st" "$T/w4.st" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && ok "compare_weights: a non-safetensors file exits 2" || bad "compare_weights garbage (rc=$rc): $(cat "$T/err")"
exit $fail
