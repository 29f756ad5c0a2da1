#!/usr/bin/env bash
# speclab run on small random models (speclab model init):
#  - a target drafting for itself accepts every draft and emits gamma + 1 tokens per iteration;
#  - at temperature 0 the speculative tokens equal the autoregressive ones for any draft (p is
#    one-hot: an accepted draft is the argmax, a rejection resamples the argmax), an independent
#    check that the exact rule and the decode loop commit the right tokens;
#  - same seed -> same tokens, whatever the thread count;
#  - the run log read back by h5py has the documented datasets and consistent counts, and the
#    report's numbers equal an independent recomputation from the log (numpy, Theorem 3.8 closed form);
#  - speclab analyze reads the run log, and a measure log with --run;
#  - resume: a longer prompt list keeps the finished shards;
#  - bad input -> exit 2, one line on stderr, nothing on stdout, nothing lost.
set -u
S=${SPECLAB:-build/speclab}
D=$(mktemp -d /tmp/sl_run_cli.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail=0
TOK=models/tokenizer.json
cfg() { echo "{\"vocab_size\":$1,\"n_layer\":$2,\"n_head\":4,\"d_model\":$3,\"d_ff\":$((4 * $3)),\"max_seq_len\":$4}"; }
# --init-std 0.2 gives peaked, varied distributions (the default 0.02 is nearly uniform: alpha ~ 0.9).
"$S" model init --arch gpt2 --config "$(cfg 4096 2 64 256)" --init-std 0.2 --out "$D/t.st" --seed 1 --tokenizer-json "$TOK" >/dev/null || { echo "FAIL: model init"; exit 1; }
"$S" model init --arch gpt2 --config "$(cfg 4096 1 32 256)" --init-std 0.2 --out "$D/d.st" --seed 2 >/dev/null || { echo "FAIL: model init"; exit 1; }
"$S" model init --arch gpt2 --config "$(cfg 4000 1 32 256)" --out "$D/d4000.st" --seed 3 >/dev/null || { echo "FAIL: model init"; exit 1; }
"$S" model init --arch gpt2 --config "$(cfg 4096 1 32 48)" --out "$D/short.st" --seed 4 --tokenizer-json "$TOK" >/dev/null || { echo "FAIL: model init"; exit 1; }
head -6 data/prompts/prose.txt > "$D/p.txt"
head -3 data/prompts/code.txt >> "$D/p.txt"
RUN=("$S" run --prompts "$D/p.txt" --cost-reps 3 --boot 200)

# 1. Self-drafting: alpha = 1, gamma + 1 tokens per iteration.
"${RUN[@]}" --target "$D/t.st" --draft "$D/t.st" --tokens 30 --gamma 4 --seed 5 --out "$D/self.h5" --format json > "$D/self.json" \
  || { echo "FAIL: self-drafting run"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: self-drafting must accept everything"; fail=1; }
import json, sys, h5py, numpy as np
d = sys.argv[1]
r = {m["metric"]: m for m in json.load(open(f"{d}/self.json"))["run"]}
f = h5py.File(f"{d}/self.h5", "r")
it = f["iterations"]
assert r["acceptance_rate"]["value"] == 1 and r["alpha_hat"]["value"] == 1, r["acceptance_rate"]
assert (it["accepted"][:] == 4).all() and (it["emitted"][:] == 5).all()
assert (f["drafts/accepted"][:] == 1).all()
# p == q: every logged beta is 1 up to float32 logits standardised in double (1e-9 is generous).
assert np.abs(f["drafts/beta"][:] - 1).max() < 1e-9
assert r["tokens_per_iteration"]["value"] == 5 and r["expected_tokens"]["value"] == 5
print("self-drafting: ok")
PY

# 2. Temperature 0: speculative tokens == autoregressive tokens, for a different draft.
"${RUN[@]}" --target "$D/t.st" --draft "$D/d.st" --tokens 40 --gamma 3 --temperature 0 --out "$D/t0.h5" \
  --tokens-out "$D/t0.tok" >/dev/null || { echo "FAIL: temperature-0 run"; fail=1; }
/usr/bin/python3 - "$D/t0.tok" <<'PY' || { echo "FAIL: temperature 0: speculative != autoregressive"; fail=1; }
import sys
rows = [l.split() for l in open(sys.argv[1])]
assert len(rows) == 18
for a, b in zip(rows[0::2], rows[1::2]):
    assert a[1] == "speculative" and b[1] == "autoregressive" and int(b[0]) == int(a[0]) + 1
    assert a[2] == b[2], (a, b)
    assert len(a[2].split(",")) == 40
print("temperature 0, speculative == greedy: ok")
PY

# 2b. The same prompts given as token ids (--prompt-ids, the prompts tokenized by `tokenize encode
# --jsonl`): the same continuations, token for token.
/usr/bin/python3 - "$D/p.txt" > "$D/p.jsonl" <<'PY'
import json, re, sys
esc = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}  # data/README.md's escapes
for line in open(sys.argv[1], encoding="utf-8"):
    print(json.dumps(re.sub(r"\\(.)", lambda m: esc[m.group(1)], line.rstrip("\n"))))
PY
"$S" tokenize encode --tokenizer "$D/t.st" --jsonl --in "$D/p.jsonl" > "$D/p.ids" || { echo "FAIL: tokenize encode --jsonl"; fail=1; }
"$S" run --prompt-ids "$D/p.ids" --cost-reps 3 --boot 200 --target "$D/t.st" --draft "$D/d.st" --tokens 40 --gamma 3 \
  --temperature 0 --out "$D/t0ids.h5" --tokens-out "$D/t0ids.tok" >/dev/null || { echo "FAIL: run --prompt-ids"; fail=1; }
cmp -s "$D/t0.tok" "$D/t0ids.tok" && echo "run --prompt-ids == run --prompts: ok" || { echo "FAIL: --prompt-ids tokens differ"; fail=1; }

# 3. Same seed -> same tokens and the same logged decisions, 1 or 2 threads.
for th in 1 2; do
  OMP_NUM_THREADS=$th "${RUN[@]}" --target "$D/t.st" --draft "$D/d.st" --tokens 30 --gamma 3 --temperature 0.9 --seed 7 \
    --out "$D/s$th.h5" --tokens-out "$D/s$th.tok" >/dev/null || { echo "FAIL: seeded run ($th threads)"; fail=1; }
done
cmp -s "$D/s1.tok" "$D/s2.tok" || { echo "FAIL: same seed, different tokens"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: same seed, different logs"; fail=1; }
import sys, h5py, numpy as np
d = sys.argv[1]
a, b = h5py.File(f"{d}/s1.h5", "r"), h5py.File(f"{d}/s2.h5", "r")
for ds in ["iterations/accepted", "iterations/emitted", "drafts/token", "drafts/accepted", "drafts/beta",
           "sequences/n_generated", "sequences/mode", "prompts/tokens"]:
    assert np.array_equal(a[ds][:], b[ds][:]), ds
print("same seed, same log decisions: ok")
PY

# 4. The log read back by h5py, and the report recomputed from it independently.
"${RUN[@]}" --target "$D/t.st" --draft "$D/d.st" --tokens 30 --gamma 3 --seed 7 --temperature 0.9 --out "$D/s1.h5" \
  --format json > "$D/s1.json" || { echo "FAIL: report of an existing log"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: run log contents"; fail=1; }
import json, sys, hashlib, h5py, numpy as np
d = sys.argv[1]
f = h5py.File(f"{d}/s1.h5", "r")
A = f.attrs
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
assert A["schema"].decode() == "speclab-log" and A["schema_version"] == 1 and A["kind"].decode() == "run"
assert A["gamma"] == 3 and A["rule"].decode() == "exact" and A["tokens_per_sequence"] == 30 and A["temperature"] == 0.9
assert A["target_sha256"].decode() == sha(f"{d}/t.st") and A["draft_sha256"].decode() == sha(f"{d}/d.st")
for g, cols in {"iterations": "sequence iteration gamma drafted accepted emitted draft_s verify_s sample_s",
                "drafts": "sequence iteration draft_position token accepted beta",
                "sequences": "sequence prompt_id n_prompt_tokens n_generated n_rows n_drafts mode wall_s",
                "prompts": "tokens", "costs": "n v call_s"}.items():
    for c in cols.split():
        assert f[g][c].ndim == 1, (g, c)
it, dr, sq = f["iterations"], f["drafts"], f["sequences"]
mode, nrows, seqid = sq["mode"][:], sq["n_rows"][:], sq["sequence"][:]
assert len(mode) == 18 and (mode == np.arange(18) % 2).all() and (seqid == np.arange(18)).all()
assert (sq["prompt_id"][:] == np.arange(18) // 2).all()
assert (sq["n_generated"][:] == 30).all()                      # no eos: every sequence decodes N tokens
assert (nrows[mode == 1] == 0).all() and (sq["n_drafts"][:] == 3 * nrows).all()
assert nrows.sum() == len(it["accepted"]) and sq["n_drafts"][:].sum() == len(dr["token"])
acc, em = it["accepted"][:], it["emitted"][:]
assert (it["drafted"][:] == 3).all() and (em == acc + 1).all() and ((acc >= 0) & (acc <= 3)).all()
s_it = it["sequence"][:]
for s in range(0, 18, 2):                                       # emitted covers N, the last iteration may overshoot
    e = em[s_it == s]
    assert e.sum() >= 30 and e.sum() - e[-1] < 30, (s, e)
# drafts/accepted is the prefix of accepted drafts of its iteration
da = dr["accepted"][:].reshape(-1, 3)
assert (da.sum(1) == acc).all() and (np.diff(da.astype(int), axis=1) <= 0).all()
assert (dr["draft_position"][:].reshape(-1, 3) == [1, 2, 3]).all()
b = dr["beta"][:]
assert ((b >= 0) & (b <= 1 + 1e-12)).all()
n, v, call = f["costs/n"][:], f["costs/v"][:], f["costs/call_s"][:]
assert (n == np.arange(1, 17)).all() and v[0] == 1 and np.allclose(v, call / call[0], rtol=1e-12)
C = f["costs"].attrs
assert abs(C["c"] - C["draft_step_s"] / C["target_step_s"]) < 1e-12 * C["c"] and C["target_step_s"] == call[0]
# The report against numpy
r = {m["metric"]: m for m in json.load(open(f"{d}/s1.json"))["run"]}
tested = (acc + (acc < 3)).sum()
alpha = acc.sum() / tested
assert abs(r["alpha_hat"]["value"] - alpha) < 1e-12 and abs(r["acceptance_rate"]["value"] - acc.sum() / (3 * len(acc))) < 1e-12
assert abs(r["tokens_per_iteration"]["value"] - em.mean()) < 1e-12
tested_mask = np.arange(3)[None, :] <= acc[:, None]              # accepted drafts and the first rejection
assert abs(r["beta_tested"]["value"] - b.reshape(-1, 3)[tested_mask].mean()) < 1e-12
w, g = sq["wall_s"][:], sq["n_generated"][:]
speed = (w[mode == 1].sum() / g[mode == 1].sum()) / (w[mode == 0].sum() / g[mode == 0].sum())
assert abs(r["speedup"]["value"] - speed) < 1e-9 * speed
c = C["c"]; EN = sum(alpha ** k for k in range(4))
assert abs(r["expected_tokens"]["value"] - EN) < 1e-12
assert abs(r["predicted_thm38"]["value"] - EN / (3 * c + 1)) < 1e-9          # Theorem 3.8
assert abs(r["predicted_general"]["value"] - EN / (3 * c + v[3])) < 1e-9     # generalised, v(gamma + 1)
lo, hi = r["speedup"]["ci_lo"], r["speedup"]["ci_hi"]
assert lo <= speed <= hi and r["alpha_hat"]["ci_lo"] <= alpha <= r["alpha_hat"]["ci_hi"]
assert r["general_in_ci"]["value"] == (lo <= r["predicted_general"]["value"] <= hi)
ts = {t["component"]: t for t in json.load(open(f"{d}/s1.json"))["time_split"]}
assert abs(ts["drafting"]["seconds"] - it["draft_s"][:].sum()) < 1e-9 and abs(ts["speculative_total"]["seconds"] - w[mode == 0].sum()) < 1e-9
print("run log and report: ok")
PY

# 5. analyze reads the run log alone, and next to a measure log of the same pair.
"$S" analyze "$D/s1.h5" --format json > /dev/null || { echo "FAIL: analyze RUN.h5"; fail=1; }
"$S" analyze "$D/s1.h5" --validate > /dev/null || { echo "FAIL: analyze --validate RUN.h5"; fail=1; }
"$S" measure --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --tokens 30 --temperature 0.9 --dist none \
  --out "$D/m.h5" > /dev/null || { echo "FAIL: measure"; fail=1; }
"$S" analyze "$D/m.h5" --run "$D/s1.h5" --gamma-max 4 --format json > "$D/a.json" || { echo "FAIL: analyze --run"; fail=1; }
/usr/bin/python3 -c "
import json; r = json.load(open('$D/a.json'))
assert any('run' in k for k in r), list(r)" || { echo "FAIL: analyze --run has no run section"; fail=1; }

# 5b. The smallest cost table (--v-max = gamma + 1 = 2) leaves the calibration only 2 tokens of
# room past its context: it must fit its baseline steps in them.
"${RUN[@]}" --target "$D/t.st" --draft "$D/d.st" --max-prompts 2 --tokens 10 --gamma 1 --v-max 2 --out "$D/vmax2.h5" \
  > /dev/null || { echo "FAIL: run --gamma 1 --v-max 2"; fail=1; }

# 6. Resume: 2 prompts, then 4 (shards of 1 prompt): the first shards are kept, not recomputed.
head -2 "$D/p.txt" > "$D/p2.txt"
"$S" run --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --max-prompts 2 --tokens 20 --gamma 2 --shard-prompts 1 \
  --cost-reps 3 --out "$D/res.h5" >/dev/null || { echo "FAIL: resume, first part"; fail=1; }
m0=$(stat -c %Y.%s "$D/res.h5.d/shard-000000.h5"); i0=$(stat -c %i "$D/res.h5.d/shard-000000.h5")
sleep 1
"$S" run --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --max-prompts 4 --tokens 20 --gamma 2 --shard-prompts 1 \
  --cost-reps 3 --out "$D/res.h5" --tokens-out "$D/res.tok" >/dev/null || { echo "FAIL: resume, second part"; fail=1; }
[ "$(stat -c %Y.%s "$D/res.h5.d/shard-000000.h5")" = "$m0" ] && [ "$(stat -c %i "$D/res.h5.d/shard-000000.h5")" = "$i0" ] \
  || { echo "FAIL: resume recomputed a finished shard"; fail=1; }
[ "$(cut -d' ' -f1 "$D/res.tok" | tr '\n' ' ')" = "4 5 6 7 " ] || { echo "FAIL: resume decoded $(cut -d' ' -f1 "$D/res.tok" | tr '\n' ' ')"; fail=1; }
"$S" run --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --max-prompts 4 --tokens 20 --gamma 2 --shard-prompts 1 \
  --cost-reps 3 --out "$D/fresh.h5" >/dev/null || { echo "FAIL: fresh run"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: resumed log differs from a fresh one"; fail=1; }
import sys, h5py, numpy as np
d = sys.argv[1]
a, b = h5py.File(f"{d}/res.h5", "r"), h5py.File(f"{d}/fresh.h5", "r")
assert a.attrs["n_sequences"] == 8
for ds in ["iterations/accepted", "drafts/token", "drafts/accepted", "sequences/n_generated", "sequences/mode", "prompts/tokens"]:
    assert np.array_equal(a[ds][:], b[ds][:]), ds
print("resume: ok")
PY

# A crash leaves complete shards, a stale temporary file and no final log: the rerun removes the
# temporary, decodes only the missing shard and assembles the same log.
rm "$D/res.h5" "$D/res.h5.d/shard-000003.h5"
echo junk > "$D/res.h5.d/shard-000003.h5.tmp.99999"
"$S" run --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --max-prompts 4 --tokens 20 --gamma 2 --shard-prompts 1 \
  --cost-reps 3 --out "$D/res.h5" --tokens-out "$D/res2.tok" >/dev/null || { echo "FAIL: resume after a crash"; fail=1; }
[ "$(cut -d' ' -f1 "$D/res2.tok" | tr '\n' ' ')" = "6 7 " ] && [ ! -e "$D/res.h5.d/shard-000003.h5.tmp.99999" ] \
  || { echo "FAIL: resume after a crash decoded $(cut -d' ' -f1 "$D/res2.tok" | tr '\n' ' ')"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: log resumed after a crash differs from a fresh one"; fail=1; }
import sys, h5py, numpy as np
d = sys.argv[1]
a, b = h5py.File(f"{d}/res.h5", "r"), h5py.File(f"{d}/fresh.h5", "r")
for ds in ["iterations/accepted", "drafts/token", "drafts/accepted", "sequences/n_generated", "prompts/tokens"]:
    assert np.array_equal(a[ds][:], b[ds][:]), ds
print("resume after a crash: ok")
PY

# 7. Bad input: exit 2, one line, nothing on stdout.
check_bad() { # expected-substring args...
  local want=$1; shift
  local out rc
  out=$("$S" run "$@" 2>"$D/err"); rc=$?
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(wc -l < "$D/err")" -ne 1 ] || ! grep -q -- "$want" "$D/err"; then
    echo "FAIL: run $* -> rc=$rc stderr='$(cat "$D/err")' (wanted exit 2, one line with '$want')"; fail=1
  else echo "ok   $want: $(cat "$D/err")"; fi
}
B=(--prompts "$D/p.txt" --tokens 10 --gamma 3 --cost-reps 1)
check_bad "vocabulary mismatch" --target "$D/t.st" --draft "$D/d4000.st" "${B[@]}" --out "$D/bad.h5"
check_bad "longer than the context" --target "$D/short.st" --draft "$D/short.st" --prompts "$D/p.txt" --tokens 40 --gamma 3 --out "$D/bad.h5"
touch "$D/file"
check_bad "cannot write output" --target "$D/t.st" --draft "$D/d.st" "${B[@]}" --out "$D/file/r.h5"
check_bad "--gamma" --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --tokens 10 --gamma 0 --out "$D/bad.h5"
check_bad "--gamma" --target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --tokens 10 --gamma 65 --out "$D/bad.h5"
check_bad "--v-max" --target "$D/t.st" --draft "$D/d.st" "${B[@]}" --v-max 3 --out "$D/bad.h5"
check_bad "not a run log" --target "$D/t.st" --draft "$D/d.st" "${B[@]}" --out "$D/m.h5"
# Another schema version: the assembled log, then a shard (the final file gone): refused, untouched.
cp -r "$D/res.h5" "$D/v2.h5"; cp -r "$D/res.h5.d" "$D/v2.h5.d"
/usr/bin/python3 -c "
import h5py; f = h5py.File('$D/v2.h5', 'r+'); f.attrs['schema_version'] = 2"
sum0=$(md5sum "$D/v2.h5" | cut -d' ' -f1)
R=(--target "$D/t.st" --draft "$D/d.st" --prompts "$D/p.txt" --max-prompts 4 --tokens 20 --gamma 2 --shard-prompts 1 --cost-reps 3 --out "$D/v2.h5")
check_bad "schema version 2" "${R[@]}"
[ "$(md5sum "$D/v2.h5" | cut -d' ' -f1)" = "$sum0" ] || { echo "FAIL: a refused log was modified"; fail=1; }
rm "$D/v2.h5"
/usr/bin/python3 -c "
import h5py, numpy as np; f = h5py.File('$D/v2.h5.d/shard-000001.h5', 'r+')
f.attrs['fingerprint'] = np.bytes_(f.attrs['fingerprint'].replace(b'schema=1;', b'schema=2;'))  # fixed-length, as written"
check_bad "schema version 2" "${R[@]}"
[ ! -e "$D/v2.h5" ] || { echo "FAIL: a log was assembled from a shard of another schema"; fail=1; }
exit $fail
