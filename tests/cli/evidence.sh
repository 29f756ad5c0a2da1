#!/usr/bin/env bash
# analysis/evidence.sh end to end on tiny random models (seconds): one row per draft x domain x
# temperature, every cell ok, numbers in range; the self-drafting row has alpha = 1 inside its CI and
# gamma + 1 tokens per iteration; bad arguments -> exit 2 with one line.
set -u
S=${SPECLAB:-build/speclab}
D=$(mktemp -d /tmp/sl_evidence.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail=0
cfg() { echo "{\"vocab_size\":4096,\"n_layer\":$1,\"n_head\":4,\"d_model\":$2,\"d_ff\":$((4 * $2)),\"max_seq_len\":128}"; }
"$S" model init --arch gpt2 --config "$(cfg 2 64)" --init-std 0.2 --out "$D/t.st" --seed 1 --tokenizer-json models/tokenizer.json >/dev/null || exit 1
"$S" model init --arch llama --config "$(cfg 1 32)" --init-std 0.2 --out "$D/d.st" --seed 2 >/dev/null || exit 1
analysis/evidence.sh --speclab "$S" --target "$D/t.st" --drafts "$D/d.st self=$D/t.st" --prompts 3 --tokens 12 --gamma 3 \
  --cost-reps 2 --boot 50 --out "$D/ev" > "$D/table.md" 2>/dev/null || { echo "FAIL: evidence.sh"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: evidence table"; fail=1; }
import sys
d = sys.argv[1]
t = open(f"{d}/table.md").read()
assert t == open(f"{d}/ev/evidence.md").read()
rows = [l.split("|")[1:-1] for l in t.splitlines() if l.startswith("| ") and not l.startswith("| draft")]
assert len(rows) == 8, rows                               # 2 drafts x 2 domains x 2 temperatures
assert {(r[0].strip(), r[1].strip(), r[2].strip()) for r in rows} == {
    (a, b, c) for a in ("d", "self") for b in ("prose", "code") for c in ("1", "0")}
for r in rows:
    assert len(r) == 16, r
    alpha = float(r[3].split()[0]); speed = float(r[11].split()[0])
    assert 0 <= alpha <= 1 and speed > 0, r
    # the paired alpha_hat - beta_tested: value, CI and whether 0 is inside
    diff, lo, hi, ok = r[7].split()
    assert float(lo.strip("[,")) <= float(diff) <= float(hi.strip("]")) and ok in ("yes", "no"), r
    if r[0].strip() == "self":                            # p == q: alpha = 1, gamma + 1 = 4 tokens
        assert r[3].startswith(" 1.000 [1.000, 1.000]") and r[5].strip() == "yes" and r[8].strip() == "4.00" and r[6].strip() == "1.000", r
        # beta = 1 (up to float rounding, which can print -0.000) and every draft accepted
        assert max(abs(float(diff)), abs(float(lo.strip("[,"))), abs(float(hi.strip("]")))) < 5e-4 and ok == "yes", r
print("evidence table: ok")
PY
for bad in "--target $D/none.st --drafts $D/d.st" "--target $D/t.st" "--target $D/t.st --drafts $D/d.st --tokens x" \
           "--target $D/t.st --drafts $D/d.st --domains nosuch"; do
  out=$(analysis/evidence.sh --speclab "$S" $bad --out "$D/ev2" 2>"$D/err"); rc=$?
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(wc -l < "$D/err")" -ne 1 ]; then
    echo "FAIL: evidence.sh $bad -> rc=$rc $(cat "$D/err")"; fail=1
  else echo "ok   $(cat "$D/err")"; fi
done
exit $fail
