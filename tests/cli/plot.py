#!/usr/bin/env python3
"""tests/cli/plot.py: `speclab plot` end to end.

Every kind renders to PNG, SVG and PDF (file signatures, plausible sizes, FILE.dat and FILE.gp
beside the figure, no temporary file left); the .dat holds the library's numbers, checked against
an independent computation (the closed forms recomputed here) or against the same numbers from
another command (`speclab analyze --format json`, `speclab mc --format json`) at 1e-12; the .gp
script reruns by hand and draws the figure again; a broken gnuplot (a fake one first on PATH) and
a missing one give exit 2 with a one-line message, and leave no figure, no temporary file and no
process behind; `-o -` and `--term dumb` draw text art. Logs are small synthetic ones from
`speclab measure --synthetic noisy`. The run kinds (run-speedup, run-chen) read run logs at
gamma = 1, 2, 3 of two tiny random models (speclab model init, speclab run): their .dat holds the
numbers of `speclab run --format json` for each log (and accepted drafts per iteration from the
log itself, read with h5py)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SPECLAB = os.path.abspath(os.environ.get("SPECLAB", "build/speclab"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args, env=None, cwd=None):
    p = subprocess.run([SPECLAB, *args], capture_output=True, text=True, env=env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr

QQ_R = 30  # verify-qq replications


def blocks(path):
    """The .dat file as [(header, rows)], header the '# block K: NAME (STYLE)' line."""
    out, cur, head = [], [], None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for chunk in text.split("\n\n\n"):
        head, rows = None, []
        for line in chunk.splitlines():
            if line.startswith("# block "):
                head = line
            elif line.startswith("#") or not line.strip():
                continue
            else:
                rows.append([float(v) for v in line.split()])
        if head is not None:
            out.append((head, rows))
    return out


def close(a, b, rtol=1e-12, atol=1e-15):
    return abs(a - b) <= rtol * abs(b) + atol


SIGNATURES = {".png": (b"\x89PNG\r\n\x1a\n",), ".svg": (b"<?xml", b"<svg"), ".pdf": (b"%PDF",)}


def check_figure(path, what):
    ok = os.path.exists(path)
    check(ok, f"{what}: {path} exists")
    if not ok:
        return
    ext = os.path.splitext(path)[1]
    with open(path, "rb") as f:
        head = f.read(64)
    check(any(head.startswith(s) for s in SIGNATURES[ext]), f"{what}: {path} starts with a {ext} signature, got {head[:8]!r}")
    size = os.path.getsize(path)
    check(3000 < size < 2_000_000, f"{what}: {path} size {size} plausible")
    stem = os.path.splitext(path)[0]
    for side in (stem + ".dat", stem + ".gp"):
        check(os.path.exists(side), f"{what}: {side} written next to the figure")
    d = os.path.dirname(path) or "."
    left = [n for n in os.listdir(d) if ".tmp-" in n]
    check(not left, f"{what}: no temporary files left in {d}: {left}")


def main():
    tmp = tempfile.mkdtemp(prefix="speclab-plot-test-")
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"plot.py: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("plot.py: all checks passed")
    return 0


def body(tmp):
    logs = {}
    for name, extra in (("a", []), ("b", ["--noise", "2"]), ("t0", ["--temperature", "0"]), ("nd", ["--dist", "none"])):
        path = os.path.join(tmp, name + ".h5")
        rc, _, err = run("measure", "--synthetic", "noisy", "--tokens", "48", "--sequences", "6", "--vocab", "64",
                         "--out", path, *extra)
        check(rc == 0, f"measure {name}: rc {rc} {err}")
        logs[name] = path
    analyses = {}
    for name in ("a", "b", "t0"):
        rc, out, err = run("analyze", logs[name], "--format", "json")
        check(rc == 0, f"analyze {name}: {err}")
        analyses[name] = json.loads(out)

    kinds = [
        ("theory-tokens", []),
        ("theory-speedup", []),
        ("theory-optimal-gamma", []),
        ("theory-ops", ["--c-hat", "0.1"]),
        ("beta-hist", [logs["a"], "B=" + logs["b"], logs["t0"]]),
        ("lenience", [logs["a"]]),
        ("acceptance-position", [logs["a"]]),
        ("acceptance-confidence", [logs["a"], logs["b"]]),
        ("alpha-ci", ["A=" + logs["a"], "B=" + logs["b"], logs["t0"]]),
        ("mc-tokens", ["--family", "noisy", "--iterations", "20000"]),
        ("verify-power", []),
        # The kind's default 20000 iterations per run: at 2000 the small-count tables take the
        # Monte Carlo p-values (20000 multinomial draws per test), 20x the time for the same figure.
        ("verify-qq", ["--family", "noisy", "--replications", str(QQ_R)]),
    ]
    figdir = os.path.join(tmp, "figs")
    os.mkdir(figdir)
    for kind, args in kinds:
        for ext in (".png", ".svg", ".pdf"):
            out = os.path.join(figdir, kind + ext)
            rc, so, err = run("plot", kind, *args, "-o", out)
            check(rc == 0, f"plot {kind} {ext}: rc {rc}: {err.strip()}")
            check(so == "", f"plot {kind} {ext}: nothing on stdout")
            check_figure(out, f"plot {kind} {ext}")
    fig = lambda k: os.path.join(figdir, k + ".dat")

    # theory-tokens: E[N] = (1 - a^(g+1)) / (1 - a), g + 1 at a = 1.
    bl = blocks(fig("theory-tokens"))
    check([h.split(": ")[1].split(" (")[0] for h, _ in bl] == [f"γ = {g}" for g in (1, 2, 3, 5, 7, 10)],
          f"theory-tokens: one block per default gamma, got {[h for h, _ in bl]}")
    n_checked = 0
    for (head, rows), g in zip(bl, (1, 2, 3, 5, 7, 10)):
        check(len(rows) == 201 and rows[0][0] == 0 and rows[-1][0] == 1, f"theory-tokens γ={g}: alpha grid 0..1 in 201 points")
        for a, en in rows:
            want = g + 1.0 if a == 1 else (1 - a ** (g + 1)) / (1 - a)
            check(close(en, want), f"theory-tokens γ={g} α={a}: {en!r} vs {want!r}")
            n_checked += 1
    check(n_checked == 6 * 201, "theory-tokens: every point checked")

    # theory-speedup at c = 0.05 (Theorem 3.8) and theory-ops at c_hat = 0.1 (Theorem 3.11).
    for head, rows in blocks(fig("theory-speedup")):
        if "no speculation" in head:
            check(all(r[1] == 1 for r in rows), "theory-speedup: the reference line is at 1")
            continue
        g = int(head.split("γ = ")[1].split(" ")[0])
        for a, f in rows:
            en = g + 1.0 if a == 1 else (1 - a ** (g + 1)) / (1 - a)
            check(close(f, en / (g * 0.05 + 1)), f"theory-speedup γ={g} α={a}")
    for head, rows in blocks(fig("theory-ops")):
        if "no speculation" in head:
            continue
        g = int(head.split("γ = ")[1].split(" ")[0])
        for a, f in rows:
            en = g + 1.0 if a == 1 else (1 - a ** (g + 1)) / (1 - a)
            check(close(f, (g * 0.1 + g + 1) / en), f"theory-ops γ={g} α={a}")
    # theory-optimal-gamma: brute force over gamma 1..20 of Theorem 3.8 (0 when nothing beats 1).
    for head, rows in blocks(fig("theory-optimal-gamma")):
        c = float(head.split("c = ")[1].split(" ")[0])
        for a, g in rows[::10]:
            fac = [((g2 + 1.0) if a == 1 else (1 - a ** (g2 + 1)) / (1 - a)) / (g2 * c + 1) for g2 in range(1, 21)]
            best = max(fac)
            want = 0 if best <= 1 else 1 + fac.index(best)
            ties = [i + 1 for i, v in enumerate(fac) if abs(v - best) <= 1e-12 * best]
            check(g == want or (g in ties), f"theory-optimal-gamma c={c} α={a}: {g} vs {want}")

    # beta-hist: the fractions of `speclab analyze`'s histogram, one block per log, in order.
    bl = blocks(fig("beta-hist"))
    check(len(bl) == 3, "beta-hist: three logs, three blocks")
    check("B, α" in bl[1][0] and "t0.h5 (T = 0)" in bl[2][0], f"beta-hist: NAME=FILE label and the T = 0 note: {bl[1][0]} {bl[2][0]}")
    for (head, rows), name in zip(bl, ("a", "b", "t0")):
        hist = analyses[name]["beta_histogram"]
        check(len(rows) == len(hist), f"beta-hist {name}: {len(rows)} bins vs {len(hist)}")
        for r, h in zip(rows, hist):
            check(close(r[0], (h["beta_lo"] + h["beta_hi"]) / 2) and close(r[1], h["fraction"]),
                  f"beta-hist {name} bin {h['beta_lo']}: {r} vs {h}")
        check(close(sum(r[1] for r in rows), 1.0, 1e-12), f"beta-hist {name}: normalised")

    # lenience: both forms as analyze reports them.
    bl = blocks(fig("lenience"))
    len_tab = analyses["a"]["lenience"]
    check(len(bl) == 2, "lenience: two forms")
    for (head, rows), col in zip(bl, ("alpha_standard", "alpha_temperature0")):
        for r, t in zip(rows, len_tab):
            check(close(r[0], t["lenience"]) and close(r[1], t[col]), f"lenience {col} l={t['lenience']}")
    rc, _, _ = run("plot", "lenience", logs["t0"], "-o", os.path.join(tmp, "len0.png"))
    with open(os.path.join(tmp, "len0.gp"), encoding="utf-8") as f:
        check("T = 0" in f.read(), "lenience of a T = 0 log says so in the title")
    for head, rows in blocks(os.path.join(tmp, "len0.dat")):
        beta = analyses["t0"]["summary"][0]["alpha"]
        check(all(close(r[1], beta, 1e-9) for r in rows), "lenience T = 0: flat at beta")

    # acceptance-position: the replay columns of analyze.
    bl = blocks(fig("acceptance-position"))
    pos = analyses["a"]["acceptance_by_position"]
    for (head, rows), col in zip(bl, ("conditional_replay", "unconditional_replay")):
        check(len(rows) == 12, f"acceptance-position {col}: 12 positions")
        for r, t in zip(rows, pos):
            check(r[0] == t["position"] and close(r[1], t[col]), f"acceptance-position {col} {t['position']}")

    # acceptance-confidence: mean beta per non-empty bin.
    bl = blocks(fig("acceptance-confidence"))
    for (head, rows), name in zip(bl, ("a", "b")):
        conf = [t for t in analyses[name]["acceptance_by_confidence"] if t["count"] > 0]
        check(len(rows) == len(conf), f"acceptance-confidence {name}: one point per non-empty bin")
        for r, t in zip(rows, conf):
            check(close(r[0], (t["q_max_lo"] + t["q_max_hi"]) / 2) and close(r[1], t["mean_beta"]),
                  f"acceptance-confidence {name} bin {t['q_max_lo']}")

    # alpha-ci: alpha and its bootstrap CI as analyze reports them (same seed and resamples).
    bl = blocks(fig("alpha-ci"))
    for (head, rows), name in zip(bl, ("a", "b", "t0")):
        s = analyses[name]["summary"][0]
        check(len(rows) == 1 and close(rows[0][1], s["alpha"]) and close(rows[0][2], s["alpha_ci_lo"])
              and close(rows[0][3], s["alpha_ci_hi"]), f"alpha-ci {name}: {rows} vs {s}")
    with open(fig("alpha-ci").replace(".dat", ".gp"), encoding="utf-8") as f:
        gp = f.read()
    check("'A' 1" in gp and "'B' 2" in gp and "'t0.h5 (T = 0)' 3" in gp, "alpha-ci: categories labelled NAME or file name")

    # mc-tokens: the histogram and predictions of `speclab mc` with the same settings.
    rc, out, err = run("mc", "--family", "noisy", "--iterations", "20000", "--format", "json")
    tpi = json.loads(out)["tokens_per_iteration"]
    bl = blocks(fig("mc-tokens"))
    sim, ci, iid, exact = (rows for _, rows in bl)
    for k, t in enumerate(tpi):
        check(sim[k][0] == t["tokens"] and close(sim[k][1], t["frequency"]), f"mc-tokens N={t['tokens']}: frequency")
        check(ci[k][2] <= sim[k][1] <= ci[k][3], f"mc-tokens N={t['tokens']}: the interval holds the estimate")
        check(close(iid[k][1], t["pmf_iid"]) and close(exact[k][1], t["pmf"]), f"mc-tokens N={t['tokens']}: pmf")

    # verify-power: monotone in n (up to the ~1e-11 noise of the non-central chi^2 series where
    # the power is 1 to ten digits), reaching 1.
    bl = blocks(fig("verify-power"))
    for head, rows in bl[:-1]:
        ys = [r[1] for r in rows]
        check(all(b >= a - 1e-9 for a, b in zip(ys, ys[1:])) and ys[-1] > 0.99, f"verify-power {head}: rises to 1")

    # verify-qq: per test its QQ_R p-values in [0, 1], sorted, at (i - 0.5)/R; the band at each i
    # is the Beta(i, R - i + 1) 2.5% and 97.5% quantiles (scipy as the independent reference).
    from scipy.stats import beta as beta_dist
    bl = blocks(fig("verify-qq"))
    bands = [rows for head, rows in bl if "(band)" in head]
    tests = [(head, rows) for head, rows in bl if "(points)" in head]
    check(len(bands) == 1 and len(bands[0]) == QQ_R, f"verify-qq: one band of {QQ_R} points")
    for i, r in enumerate(bands[0], 1):
        check(close(r[0], (i - 0.5) / QQ_R), f"verify-qq band {i}: x at (i - 0.5)/R")
        check(abs(r[2] - beta_dist.ppf(0.025, i, QQ_R - i + 1)) <= 1e-9, f"verify-qq band {i}: lower {r[2]}")
        check(abs(r[3] - beta_dist.ppf(0.975, i, QQ_R - i + 1)) <= 1e-9, f"verify-qq band {i}: upper {r[3]}")
    check(len(tests) >= 3 and any("first (KS p = " in h for h, _ in tests), f"verify-qq: tests keyed with KS p: {[h for h, _ in tests]}")
    for head, rows in tests:
        ps = [r[1] for r in rows]
        check(len(rows) == QQ_R, f"verify-qq {head}: {len(rows)} p-values, expected {QQ_R}")
        check(all(0 <= p <= 1 for p in ps) and ps == sorted(ps), f"verify-qq {head}: in [0, 1] and sorted")
        check(all(close(r[0], (i - 0.5) / QQ_R) for i, r in enumerate(rows, 1)), f"verify-qq {head}: x = (i - 0.5)/R")
    with open(fig("verify-qq").replace(".dat", ".gp"), encoding="utf-8") as f:
        gp = f.read()
    check("'uniform quantile'" in gp and "'p-value (sorted)'" in gp, "verify-qq: axis labels")

    # The script reruns by hand, in its own directory, and draws the figure again (the .gp belongs
    # to the last format written: .pdf).
    out = os.path.join(figdir, "theory-tokens.pdf")
    size = os.path.getsize(out)
    os.unlink(out)
    p = subprocess.run(["gnuplot", "theory-tokens.gp"], cwd=figdir, capture_output=True, text=True)
    check(p.returncode == 0, f"gnuplot theory-tokens.gp: {p.stderr}")
    check_figure(out, "rerun of theory-tokens.gp")
    if os.path.exists(out):
        check(abs(os.path.getsize(out) - size) < 0.05 * size, "rerun: a figure of the same size")
    for ext in (".png", ".pdf"):
        out = os.path.join(figdir, "beta-hist" + ext)
        run("plot", "beta-hist", logs["a"], "-o", out)
        os.unlink(out)
        p = subprocess.run(["gnuplot", "beta-hist.gp"], cwd=figdir, capture_output=True, text=True)
        check(p.returncode == 0 and os.path.exists(out), f"gnuplot beta-hist.gp redraws {ext}: {p.stderr}")
        check_figure(out, f"rerun of beta-hist.gp {ext}")

    # A broken gnuplot: exit 2, its first error line, nothing written, no process left.
    fake = os.path.join(tmp, "fakebin")
    os.mkdir(fake)
    pidfile = os.path.join(tmp, "fake.pid")
    with open(os.path.join(fake, "gnuplot"), "w") as f:
        f.write("#!/bin/sh\necho $$ > %s\ncat > /dev/null\n"
                "echo '         line 7: broken gnuplot: no such terminal' >&2\necho 'a second line' >&2\nexit 1\n" % pidfile)
    os.chmod(os.path.join(fake, "gnuplot"), 0o755)
    bad = os.path.join(tmp, "bad")
    os.mkdir(bad)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
    env.pop("GNUPLOT", None)
    for kind, args in (("theory-tokens", []), ("beta-hist", [logs["a"]])):
        rc, so, err = run("plot", kind, *args, "-o", os.path.join(bad, "x.png"), env=env)
        check(rc == 2, f"broken gnuplot {kind}: exit 2, got {rc}")
        check("line 7: broken gnuplot: no such terminal" in err and len(err.strip().splitlines()) == 1,
              f"broken gnuplot {kind}: one line with gnuplot's first error: {err!r}")
        check(os.listdir(bad) == [], f"broken gnuplot {kind}: nothing left: {os.listdir(bad)}")
        pid = int(open(pidfile).read())
        alive = os.path.exists(f"/proc/{pid}")
        state = open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] if alive else "gone"
        check(not alive, f"broken gnuplot {kind}: its process {pid} is gone (state {state})")
        ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,comm"], capture_output=True, text=True).stdout
        zombies = [l for l in ps.splitlines()[1:] if l.split()[2].startswith("Z") and ("gnuplot" in l or "speclab" in l)]
        check(not zombies, f"broken gnuplot {kind}: no zombies: {zombies}")
    # An existing figure survives a failed redraw untouched.
    good = os.path.join(bad, "keep.png")
    run("plot", "theory-ops", "-o", good)
    before = open(good, "rb").read()
    rc, _, _ = run("plot", "theory-tokens", "-o", good, env=env)
    check(rc == 2 and open(good, "rb").read() == before, "a failed redraw leaves the old figure as it was")
    check(sorted(os.listdir(bad)) == ["keep.dat", "keep.gp", "keep.png"], f"a failed redraw leaves no temp: {os.listdir(bad)}")

    # A missing gnuplot: GNUPLOT names nothing, or PATH has none.
    env2 = dict(os.environ, GNUPLOT="/nonexistent/gnuplot")
    rc, _, err = run("plot", "theory-tokens", "-o", os.path.join(bad, "y.png"), env=env2)
    check(rc == 2 and "cannot run gnuplot" in err and not os.path.exists(os.path.join(bad, "y.png")),
          f"GNUPLOT=/nonexistent: exit 2 and no file: {rc} {err}")
    env3 = dict(os.environ, PATH="/nonexistent")
    env3.pop("GNUPLOT", None)
    rc, _, err = run("plot", "theory-tokens", "-o", os.path.join(bad, "y.png"), env=env3)
    check(rc == 2 and "cannot run gnuplot" in err, f"no gnuplot on PATH: exit 2: {rc} {err}")
    check(sorted(os.listdir(bad)) == ["keep.dat", "keep.gp", "keep.png"], f"missing gnuplot leaves nothing: {os.listdir(bad)}")

    # Text art on the terminal, and in a file with --term dumb.
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    rc, so, err = run("plot", "theory-tokens", "-o", "-", cwd=work)
    check(rc == 0 and "Expected tokens" in so and so.count("*") > 20 and "γ = 10" in so, f"-o -: text art on stdout: {err}")
    check(os.listdir(work) == [], f"-o -: no files written: {os.listdir(work)}")
    rc, so, err = run("plot", "beta-hist", logs["a"], "--term", "dumb", "-o", os.path.join(work, "h.txt"))
    txt = open(os.path.join(work, "h.txt"), encoding="utf-8").read() if rc == 0 else ""
    check(rc == 0 and "Distribution of" in txt and so == "", f"--term dumb -o FILE: text in the file: {err}")

    # Options and bad input: exit 2, one line naming the flag or the file.
    cases = [
        (["plot"], "give a kind"),
        (["plot", "nonsense", "-o", "x.png"], "unknown kind"),
        (["plot", "theory-tokens"], "--out is required"),
        (["plot", "theory-tokens", "-o", "x.jpg"], ".png, .svg or .pdf"),
        (["plot", "theory-tokens", "-o", "x.png", "--width", "huge"], "--width"),
        (["plot", "theory-tokens", "-o", "x.png", "--gamma", "0"], "--gamma"),
        (["plot", "theory-speedup", "-o", "x.png", "--c", "0.1,0.2"], "--c"),
        (["plot", "beta-hist", "-o", "x.png"], "at least one LOG"),
        (["plot", "beta-hist", os.path.join(tmp, "missing.h5"), "-o", "x.png"], "missing.h5"),
        (["plot", "lenience", logs["nd"], "-o", "x.png"], "full distributions"),
        (["plot", "mc-tokens", "-o", "x.png"], "--family"),
        (["plot", "mc-tokens", "--family", "noisy", "--gamma", "65", "-o", "x.png"], "--gamma"),
        (["plot", "theory-tokens", "a.h5", "-o", "x.png"], "takes no LOG"),
        (["plot", "theory-tokens", "-o", os.path.join(tmp, "nodir", "x.png")], "nodir"),
    ]
    for args, want in cases:
        rc, so, err = run(*args, cwd=work)
        check(rc == 2 and want in err and len(err.strip().splitlines()) == 1 and so == "",
              f"{' '.join(args[:4])}: exit 2 naming '{want}': rc {rc}, {err.strip()!r}")
    # A data file speclab did not write is never replaced.
    with open(os.path.join(work, "mine.dat"), "w") as f:
        f.write("precious\n")
    rc, _, err = run("plot", "theory-tokens", "-o", os.path.join(work, "mine.png"))
    check(rc == 2 and "not written by speclab plot" in err and open(os.path.join(work, "mine.dat")).read() == "precious\n",
          f"a foreign FILE.dat is refused: {err}")
    check(not os.path.exists(os.path.join(work, "mine.png")), "a refused figure is not drawn")
    rc, so, _ = run("plot", "--help")
    check(rc == 0 and "theory-optimal-gamma" in so and "--width" in so, "plot --help lists kinds and options")
    check("run-speedup" in so and "run-chen" in so, "plot --help lists the run kinds")
    run_kinds(tmp)


def png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def run_kinds(tmp):
    import h5py

    d = os.path.join(tmp, "runs")
    os.mkdir(d)
    cfg = '{"vocab_size":4096,"n_layer":1,"n_head":4,"d_model":32,"d_ff":128,"max_seq_len":256}'
    for name, seed, extra in (("t", "1", ["--tokenizer-json", "models/tokenizer.json"]), ("d", "2", [])):
        rc, _, err = run("model", "init", "--arch", "gpt2", "--config", cfg, "--init-std", "0.2", "--out",
                         os.path.join(d, name + ".st"), "--seed", seed, *extra)
        check(rc == 0, f"model init {name}: {err.strip()}")
    prompts = os.path.join(d, "p.txt")
    with open("data/prompts/prose.txt", encoding="utf-8") as src, open(prompts, "w", encoding="utf-8") as dst:
        dst.writelines(src.readlines()[:2])
    run_args = ["run", "--target", os.path.join(d, "t.st"), "--draft", os.path.join(d, "d.st"), "--prompts", prompts,
                "--tokens", "16", "--cost-reps", "2", "--boot", "100", "--format", "json"]
    reports, logs = {}, {}
    for g in (1, 2, 3):
        logs[g] = os.path.join(d, f"r{g}.h5")
        rc, out, err = run(*run_args, "--gamma", str(g), "--out", logs[g])
        check(rc == 0, f"run gamma {g}: {err.strip()}")
        reports[g] = json.loads(out) if rc == 0 else None
    if any(r is None for r in reports.values()):
        return
    # Run again on a finished log: the report comes from the log alone, the same numbers.
    rc, out, err = run(*run_args, "--gamma", "2", "--out", logs[2])
    check(rc == 0 and json.loads(out) == reports[2], f"run on a finished log reports it again: {err.strip()}")
    metric = {g: {m["metric"]: m for m in reports[g]["run"]} for g in reports}
    split = {g: {t["component"]: t for t in reports[g]["time_split"]} for g in reports}

    # Logs in any order, NAME=FILE or FILE; the report's bootstrap as speclab run's (--boot 100, seed 1).
    inputs = [logs[3], "one=" + logs[1], logs[2]]
    for kind in ("run-speedup", "run-chen"):
        for ext in (".png", ".svg", ".pdf"):
            out = os.path.join(d, kind + ext)
            rc, so, err = run("plot", kind, *inputs, "--boot", "100", "-o", out)
            check(rc == 0 and so == "", f"plot {kind} {ext}: rc {rc}: {err.strip()}")
            check_figure(out, f"plot {kind} {ext}")

    def rows_match(rows, values, what):
        """rows [gamma, y, (lo, hi)] against values {gamma: (y, lo, hi) or (y,)}."""
        check([r[0] for r in rows] == [1, 2, 3], f"{what}: one row per gamma, in order: {rows}")
        for r in rows:
            want = values[int(r[0])]
            check(len(r) == 1 + len(want) and all(close(a, b) for a, b in zip(r[1:], want)),
                  f"{what} gamma {int(r[0])}: {r[1:]} vs {want}")

    def est(name, g):
        m = metric[g][name]
        return (m["value"], m["ci_lo"], m["ci_hi"])

    bl = blocks(os.path.join(d, "run-speedup.dat"))
    heads = [h for h, _ in bl]
    check(len(bl) == 4 and "measured (errorbars)" in heads[0] and "Theorem 3.8" in heads[1] and "(band)" in heads[1]
          and "E[N]/(γc + v(γ+1))" in heads[2] and "no speculation" in heads[3], f"run-speedup blocks: {heads}")
    if len(bl) == 4:
        rows_match(bl[0][1], {g: est("speedup", g) for g in (1, 2, 3)}, "run-speedup measured")
        rows_match(bl[1][1], {g: est("predicted_thm38", g) for g in (1, 2, 3)}, "run-speedup Theorem 3.8")
        rows_match(bl[2][1], {g: est("predicted_general", g) for g in (1, 2, 3)}, "run-speedup generalised")
        check(all(r[1] == 1 for r in bl[3][1]), "run-speedup: the no-speculation line is at 1")

    accepted = {}
    for g in (1, 2, 3):
        with h5py.File(logs[g], "r") as f:
            acc = f["iterations/accepted"][:]
        check(len(acc) == metric[g]["iterations"]["value"], f"run log gamma {g}: iterations")
        accepted[g] = (acc.sum() / len(acc),)
    per_iter = lambda comp: {g: (1e3 * split[g][comp]["seconds"] / metric[g]["iterations"]["value"],) for g in (1, 2, 3)}
    bl = blocks(os.path.join(d, "run-chen.dat"))
    want = [
        ("speculative", {g: (1e3 * metric[g]["spec_time_per_token_s"]["value"],) for g in (1, 2, 3)}),
        ("autoregressive", {g: (1e3 * metric[g]["ar_time_per_token_s"]["value"],) for g in (1, 2, 3)}),
        ("emitted (measured)", {g: est("tokens_per_iteration", g) for g in (1, 2, 3)}),
        ("E[N] at α̂", {g: est("expected_tokens", g) for g in (1, 2, 3)}),
        ("drafts accepted", accepted),
        ("total", per_iter("speculative_total")),
        ("drafting", per_iter("drafting")),
        ("verification", per_iter("verification")),
    ]
    check(len(bl) == len(want), f"run-chen: {len(want)} blocks, got {[h for h, _ in bl]}")
    for (head, rows), (name, values) in zip(bl, want):
        check(name in head, f"run-chen block {head!r} is {name}")
        rows_match(rows, values, f"run-chen {name}")
    with open(os.path.join(d, "run-chen.gp"), encoding="utf-8") as f:
        gp = f.read()
    check("set multiplot layout 1,3" in gp and "Chen et al." in gp and gp.count("\nplot ") == 3,
          "run-chen: three panels side by side under one title")
    with open(os.path.join(d, "run-chen.dat"), encoding="utf-8") as f:
        dat = f.read()
    check("# panel: Time per token" in dat and "# gamma ms_per_iteration" in dat, "run-chen.dat: panels and columns named")

    # Full width by default; --width column stacks the panels; the script redraws by hand.
    check(png_size(os.path.join(d, "run-chen.png")) == (1020, 510), f"run-chen: full width {png_size(os.path.join(d, 'run-chen.png'))}")
    rc, _, err = run("plot", "run-chen", *inputs, "--width", "column", "--key", "off", "-o", os.path.join(d, "col.png"))
    check(rc == 0 and png_size(os.path.join(d, "col.png")) == (495, 921), f"run-chen --width column: stacked: {err}")
    with open(os.path.join(d, "col.gp"), encoding="utf-8") as f:
        gp = f.read()
    check("set multiplot layout 3,1" in gp and gp.count("unset key") == 3, "run-chen --width column --key off: 3 rows, no keys")
    out = os.path.join(d, "run-chen.pdf")
    os.unlink(out)
    p = subprocess.run(["gnuplot", "run-chen.gp"], cwd=d, capture_output=True, text=True)
    check(p.returncode == 0, f"gnuplot run-chen.gp: {p.stderr}")
    check_figure(out, "rerun of run-chen.gp")
    rc, so, err = run("plot", "run-chen", *inputs, "-o", "-")
    check(rc == 0 and "Time per iteration" in so and "Tokens per iteration" in so, f"run-chen -o -: text art: {err}")

    # Bad input: exit 2, one line.
    meas = os.path.join(d, "m.h5")
    run("measure", "--synthetic", "noisy", "--tokens", "16", "--sequences", "2", "--vocab", "64", "--out", meas)
    cases = [
        (["plot", "run-speedup", "-o", "x.png"], "at least one LOG"),
        (["plot", "run-speedup", logs[1], "again=" + logs[1], "-o", "x.png"], "both have γ = 1"),
        (["plot", "run-chen", meas, "-o", "x.png"], "not a run log"),
        (["plot", "run-chen", logs[1], "--run", logs[2], "-o", "x.png"], "--run"),
    ]
    for args, want in cases:
        rc, so, err = run(*args, cwd=d)
        check(rc == 2 and want in err and len(err.strip().splitlines()) == 1 and so == "",
              f"{' '.join(args[:3])}: exit 2 naming '{want}': rc {rc}, {err.strip()!r}")


if __name__ == "__main__":
    sys.exit(main())
