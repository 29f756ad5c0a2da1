#!/usr/bin/env python3
"""speclab run --gamma LIST (a sweep over gamma in one run) on the shipped target and the lookup
draft, 3 code prompts x 32 tokens at temperature 0:
 - the run log read back by h5py has the documented sweep layout (analysis/LOG_SCHEMA.md): prompt p
   is sequences 4p + j, j < 3 speculative at gamma j + 1 (rows carry that gamma), j = 3 the
   baseline, all with prompt_id p; attributes gammas, gamma, shard_sequences, threads;
 - every speculative decode keeps N tokens, and at T = 0 its tokens (--tokens-out) equal the greedy
   baseline's: an independent check of each gamma's decode;
 - the printed sweep table equals a numpy recomputation from /iterations and /sequences:
   tokens_per_iteration = kept / iterations, cost_per_iteration = (speculative wall / iterations) /
   (baseline wall / baseline tokens), speedup, the best gamma and the least-squares cost line;
 - each gamma's G-test of one alpha at every draft position (iid_g, iid_df, iid_p) equals scipy's
   chi2_contingency on the accepted/rejected counts by position, pooled as sl_stats.h pools;
 - resuming the sweep with another list is refused (exit 2, one line, nothing on stdout, nothing
   touched), and malformed lists are refused by the flag."""
import hashlib, json, os, subprocess, sys, tempfile
import h5py
import numpy as np
from scipy.stats import chi2_contingency

S = os.environ.get("SPECLAB", "build/speclab")
# One decode thread: quick on the shared 2-core machine, and the log must record it.
ENV = dict(os.environ, OMP_NUM_THREADS="1")
fail = 0


def check(ok, what):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail = 1


def gtest_check(row, a, g):
    """The G-test of one alpha at every draft position (row: iid_g, iid_df, iid_p of a report at
    gamma g) against scipy's on the same 2 x g table, counted from the iterations' accepted drafts a
    (a prefix: positions 1..a accepted, the next one rejected when a < g). Cells whose smaller
    expected count is below 5 are pooled by the C side (sl_stats.h); scipy's test is taken on the
    table pooled the same way."""
    if g < 2:
        check(row["iid_p"] is None or np.isnan(row["iid_p"]), "gamma 1: no G-test")
        return
    acc = np.array([(a > k).sum() for k in range(g)], float)
    rej = np.array([((a == k) & (a < g)).sum() for k in range(g)], float)
    keep = acc + rej > 0
    acc, rej = acc[keep], rej[keep]
    n, small = acc.sum() + rej.sum(), min(acc.sum(), rej.sum())
    key = small * (acc + rej) / n
    order = np.argsort(key, kind="stable")
    acc, rej, key = acc[order], rej[order], key[order]
    k = 0  # pool the smallest columns until the pooled one reaches 5 (or nothing is left)
    while k < len(key) and key[k] < 5:
        k += 1
    while 0 < k < len(key) and key[:k].sum() < 5:
        k += 1
    cols = ([(acc[:k].sum(), rej[:k].sum())] if k else []) + list(zip(acc[k:], rej[k:]))
    if len(cols) < 2 or small == 0:
        check(row["iid_df"] == 0 and row["iid_p"] == 1, f"gamma {g}: nothing to test after pooling: p = 1")
        return
    gs, pv, dof, _ = chi2_contingency(np.array(cols).T, correction=False, lambda_="log-likelihood")
    # 1e-9 relative on G: the same sums in another order; 1e-7 on p (GSL's and scipy's chi-square tails).
    check(close(row["iid_g"], gs) and row["iid_df"] == dof and close(row["iid_p"], pv, 1e-7),
          f"gamma {g}: G-test of one alpha by position: G {row['iid_g']:.6g}, df {row['iid_df']:.0f}, p {row['iid_p']:.3g} "
          f"= scipy's {gs:.6g}, {dof}, {pv:.3g} ({len(cols)} cells)")


def close(a, b, rel=1e-9):
    # 1e-9 relative: the C report sums the same doubles in another order (and prints 17 digits).
    return abs(a - b) <= rel * abs(b)


def digest(folder):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for n in sorted(files):
            p = os.path.join(root, n)
            st = os.stat(p)
            h.update(f"{p} {st.st_size} {st.st_mtime_ns}".encode())
            h.update(open(p, "rb").read())
    return h.hexdigest()


N, GAMMAS = 32, [1, 2, 3]
M = len(GAMMAS) + 1
with tempfile.TemporaryDirectory() as d:
    prompts, out, tok = os.path.join(d, "p.txt"), os.path.join(d, "sweep.h5"), os.path.join(d, "sweep.tok")
    with open("data/prompts/code.txt") as f, open(prompts, "w") as g:
        g.writelines(f.readlines()[:3])
    base = [S, "run", "--target", "models/family/target.safetensors", "--draft", "models/drafts/lookup.safetensors",
            "--prompts", prompts, "--tokens", str(N), "--temperature", "0", "--cost-reps", "2", "--boot", "300",
            "--out", out]
    r = subprocess.run(base + ["--gamma", "1:3", "--format", "json", "--tokens-out", tok], capture_output=True, text=True, env=ENV)
    check(r.returncode == 0, f"sweep run exits 0 ({r.stderr.strip()[:200]})")
    if r.returncode:
        sys.exit(1)
    rep = json.loads(r.stdout)
    check(sorted(rep) == ["cost_fit", "costs", "sweep"], f"tables sweep, cost_fit, costs: {sorted(rep)}")

    f = h5py.File(out, "r")
    a = f.attrs
    gl = a["gammas"].decode() if isinstance(a["gammas"], bytes) else a["gammas"]
    check(gl == "1,2,3", f"attribute gammas = 1,2,3 ({gl})")
    check(int(a["gamma"]) == 3 and int(a["shard_sequences"]) == 4 * M, "gamma = the largest, shard = M x 4 prompts")
    check(int(a["threads"]) == 1, f"threads = OMP_NUM_THREADS ({int(a['threads'])})")
    seq, it = f["sequences"], f["iterations"]
    sid, pid, mode = seq["sequence"][:], seq["prompt_id"][:], seq["mode"][:]
    kept, wall = seq["n_generated"][:], seq["wall_s"][:]
    ns = len(sid)
    check(ns == 3 * M and (sid == np.arange(ns)).all(), f"{ns} sequences, numbered in order")
    check((pid == sid // M).all() and (mode == (sid % M == M - 1)).all(), "prompt_id = s // M; mode 1 at j = M - 1")
    isq, igam = it["sequence"][:], it["gamma"][:]
    check((igam == np.array(GAMMAS + [0])[isq % M]).all() and (mode[isq] == 0).all(),
          "iteration rows of sequence s carry gamma gammas[s % M]")
    check((kept == N).all(), "every decode keeps N tokens")
    rows = [l.split() for l in open(tok)]
    check([int(x[0]) for x in rows] == list(range(ns)) and
          all(x[1] == ("autoregressive" if int(x[0]) % M == M - 1 else "speculative") for x in rows),
          "--tokens-out: SEQ MODE ids for every sequence")
    check(all(rows[M * p + j][2] == rows[M * p + M - 1][2] for p in range(3) for j in range(M - 1)),
          "temperature 0: every gamma's tokens equal the greedy baseline's")

    # The sweep table from the log alone.
    ar = mode == 1
    ar_tok = wall[ar].sum() / kept[ar].sum()
    table = rep["sweep"]
    check([row["gamma"] for row in table] == GAMMAS, "a row per gamma, ascending")
    cost, speed = [], []
    for j, row in enumerate(table):
        spec = (mode == 0) & (sid % M == j)
        iters = np.isin(isq, sid[spec]).sum()
        tpi = kept[spec].sum() / iters
        cpi = (wall[spec].sum() / iters) / ar_tok
        sp = ar_tok / (wall[spec].sum() / kept[spec].sum())
        cost.append(cpi)
        speed.append(sp)
        check(row["prompts"] == 3 and row["iterations"] == iters, f"gamma {row['gamma']}: 3 prompts, {iters} iterations")
        check(close(row["tokens_per_iteration"], tpi), f"gamma {row['gamma']}: tokens_per_iteration = kept / iterations")
        check(close(row["cost_per_iteration"], cpi), f"gamma {row['gamma']}: cost_per_iteration from wall_s")
        check(close(row["speedup"], sp) and close(row["speedup"], tpi / cpi),
              f"gamma {row['gamma']}: speedup = tokens_per_iteration / cost_per_iteration")
        check(row["cost_per_iteration_ci_lo"] <= cpi <= row["cost_per_iteration_ci_hi"], "cost CI holds the estimate")
    acc_all = it["accepted"][:]
    for j, row in enumerate(table):
        spec = (mode == 0) & (sid % M == j)
        gtest_check(row, acc_all[np.isin(isq, sid[spec])], row["gamma"])
    best = GAMMAS[int(np.argmax(speed))]
    check([row["best"] for row in table] == [int(g == best) for g in GAMMAS], f"best gamma {best}")
    b, a0 = np.polyfit(GAMMAS, cost, 1)
    fit = rep["cost_fit"][0]
    err = max(abs((a0 + b * g) / c - 1) for g, c in zip(GAMMAS, cost))
    # 1e-9 relative on a and b: numpy's least squares (SVD) against the C closed form.
    check(close(fit["fit_a"], a0) and close(fit["fit_b"], b) and close(fit["fit_max_rel_error"], err, 1e-7),
          "cost_fit = numpy's least-squares line")
    check(len(rep["costs"]) == 16, "the calibration: v(n), n = 1..16")
    f.close()

    # Another list on the same log: refused by the fingerprint, nothing touched.
    before = digest(d)
    r = subprocess.run(base + ["--gamma", "1,3"], capture_output=True, text=True, env=ENV)
    check(r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1,
          f"changed list on resume: exit 2, one line ({r.returncode}: {r.stderr.strip()[:160]})")
    check(digest(d) == before, "changed list on resume: nothing touched")
    # The same list resumes: nothing to decode, the same report apart from the clock-free columns.
    r = subprocess.run(base + ["--gamma", "1,2,3", "--format", "json"], capture_output=True, text=True, env=ENV)
    check(r.returncode == 0 and [x["iterations"] for x in json.loads(r.stdout)["sweep"]] ==
          [x["iterations"] for x in table], "same list resumes")
    for bad in ["3,2", "1:3,3", "0:2", "2:1", "1,,2", "1:2:3", "65", "1:17"]:
        r = subprocess.run(base + ["--gamma", bad], capture_output=True, text=True, env=ENV)
        check(r.returncode == 2 and r.stdout == "" and "--gamma" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"--gamma {bad}: exit 2 ({r.stderr.strip()[:120]})")
# The G-test on a table large enough to test: small random models (as tests/cli/run_models.sh
# makes them), T = 1, gamma 4, 6 prompts x 120 tokens.
with tempfile.TemporaryDirectory() as d:
    cfg = lambda v, l, dm: json.dumps({"vocab_size": v, "n_layer": l, "n_head": 4, "d_model": dm, "d_ff": 4 * dm,
                                       "max_seq_len": 256})
    for name, c, seed, extra in (("t.st", cfg(4096, 2, 64), 1, ["--tokenizer-json", "models/tokenizer.json"]),
                                 ("d.st", cfg(4096, 1, 32), 2, [])):
        subprocess.run([S, "model", "init", "--arch", "gpt2", "--config", c, "--init-std", "0.2", "--seed", str(seed),
                        "--out", os.path.join(d, name)] + extra, check=True, capture_output=True)
    prompts, out = os.path.join(d, "p.txt"), os.path.join(d, "r.h5")
    with open("data/prompts/prose.txt") as f, open(prompts, "w") as g:
        g.writelines(f.readlines()[:6])
    r = subprocess.run([S, "run", "--target", os.path.join(d, "t.st"), "--draft", os.path.join(d, "d.st"), "--prompts",
                        prompts, "--tokens", "120", "--gamma", "4", "--temperature", "1", "--seed", "3", "--cost-reps",
                        "1", "--boot", "0", "--out", out, "--format", "json"], capture_output=True, text=True, env=ENV)
    check(r.returncode == 0, f"random models, gamma 4: run exits 0 ({r.stderr.strip()[:200]})")
    if r.returncode == 0:
        rep = {m["metric"]: m["value"] for m in json.loads(r.stdout)["run"]}
        with h5py.File(out, "r") as f:
            gtest_check(rep, f["iterations/accepted"][:], 4)
sys.exit(fail)
