#!/usr/bin/env python3
"""speclab export-notebook: the notebook is valid nbformat 4.5, runs under jupyter nbconvert from
any working directory, and the numbers it recomputes from the logs with h5py + numpy equal
speclab analyze --format json's on the same logs (a float32, a float16 and a beta-only measure
log, and a run log of two tiny random models):
  - alpha (the same mean of the same doubles, summed in another order): 1e-12;
  - beta histogram counts: exactly;
  - lenience alpha(l), standard form: 1e-6 relative, the brief's bound (both sum float32 p and q
    widened to float64, in different orders: the observed difference is ~1e-15); temperature-0
    form: exactly (the same float32 ratio against the same l, so the same count);
  - E[N] from Equation 1 (Horner's rule on both sides): 1e-12; replayed E[N]: 1e-9; optimal gamma
    equal, its factor 1e-9;
  - the bootstrap CI (numpy's RNG, not speclab's streams): it contains speclab's alpha and
    overlaps speclab's CI;
  - run logs: alpha_hat = accepted/tested, tokens per iteration, the speedup and c as analyze's
    run table (1e-12), the optimal gamma with the measured c and v(n) as analyze's;
  - executing it twice, from two working directories, prints the same JSON;
  - the command in the title cell rebuilds the synthetic log bit for bit;
  - bad input (missing log, non-HDF5 file, another schema version, existing output without
    --force, missing folder, not .ipynb) -> exit 2, one line on stderr, no notebook, no temp file.
Needs python3-h5py, python3-nbformat, python3-nbclient, python3-ipykernel, jupyter-nbconvert,
python3-matplotlib (Debian)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import nbformat
import numpy as np

S = os.path.abspath(os.environ.get("SPECLAB", "build/speclab"))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
fail = 0
n_checks = 0


def check(ok, what):
    global fail, n_checks
    n_checks += 1
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail += 1


def sl(*args, cwd=None):
    return subprocess.run([S, *args], capture_output=True, text=True, cwd=cwd)


def close(a, b, tol, rel=False):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * (abs(b) if rel else 1)


def execute(nb_path, out_name, cwd):
    """jupyter nbconvert --execute, from cwd; returns the JSON lines of the executed notebook."""
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
           "--ExecutePreprocessor.timeout=300", "--ExecutePreprocessor.kernel_name=python3",
           "--output", out_name, nb_path]
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    if p.returncode != 0:
        print(p.stderr[-3000:])
        return None, None
    ex = nbformat.read(os.path.join(os.path.dirname(nb_path), out_name), as_version=4)
    lines = []
    for c in ex.cells:
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                lines += [json.loads(l) for l in o["text"].splitlines() if l.startswith('{"log": ')]
    return ex, lines


def compare_measure(name, nb, a):
    s = a["summary"][0]
    check(abs(nb["alpha"] - s["alpha"]) <= 1e-12, f"{name}: alpha {nb['alpha']!r} == speclab {s['alpha']!r} (1e-12)")
    lo, hi = nb["alpha_ci"]
    check(lo <= s["alpha"] <= hi, f"{name}: notebook CI [{lo:.6f}, {hi:.6f}] contains speclab's alpha")
    check(lo <= s["alpha_ci_hi"] and s["alpha_ci_lo"] <= hi,
          f"{name}: notebook CI overlaps speclab's [{s['alpha_ci_lo']:.6f}, {s['alpha_ci_hi']:.6f}]")
    check(nb["hist"] == [r["count"] for r in a["beta_histogram"]], f"{name}: beta histogram counts equal")
    et = a["expected_tokens"]
    check(all(abs(x - r["iid"]) <= 1e-12 for x, r in zip(nb["en_iid"], et)) and len(nb["en_iid"]) == len(et),
          f"{name}: E[N] from Equation 1 (1e-12)")
    if s["kind"] == "measure":
        check(nb["en_replay"] is not None and
              all(abs(x - r["replay"]) <= 1e-9 for x, r in zip(nb["en_replay"], et)), f"{name}: replayed E[N] (1e-9)")
    og = a["optimal_gamma"]
    grid = [r for r in og if r["c"] in (0, 0.01, 0.05, 0.1)]
    ok = len(grid) == len(nb["optimal_gamma"])
    for x, r in zip(nb["optimal_gamma"], grid):
        ok &= x["c"] == r["c"]
        if s["kind"] == "measure":  # a run log's analyze uses the measured v(n) for every c: compared below
            ok &= x["gamma_iid"] == r["gamma_iid"] and close(x["factor_iid"], r["factor_iid"], 1e-9)
            ok &= x["gamma_replay"] == r["gamma_replay"] and close(x["factor_replay"], r["factor_replay"], 1e-9)
    check(ok, f"{name}: optimal gamma per c")
    if "lenience" in a:
        L, ln = a["lenience"], nb["lenience"]
        ok = ln is not None and len(ln["standard"]) == len(L)
        ok = ok and all(close(x, r["alpha_standard"], 1e-6, rel=True) for x, r in zip(ln["standard"], L))
        ok = ok and all(abs(x - r["lenience"]) <= 1e-15 for x, r in zip(ln["l"], L))
        check(ok, f"{name}: lenience alpha(l), standard form (1e-6 relative)")
        check(ok and all(x == r["alpha_temperature0"] for x, r in zip(ln["t0"], L)),
              f"{name}: lenience alpha(l), temperature-0 form (exact)")
    else:
        check(nb["lenience"] is None, f"{name}: no lenience without distributions")


def compare_run(name, nb, a):
    u, r = nb["run"], a["run"][0]
    check(abs(u["alpha_hat"] - r["acceptance"]) <= 1e-12, f"{name}: alpha_hat = accepted/tested == analyze's acceptance")
    check(abs(u["tokens_per_iteration"] - r["mean_emitted"]) <= 1e-12, f"{name}: tokens per iteration")
    check(close(u["speedup"], r["walltime_speedup"], 1e-12, rel=True), f"{name}: observed speedup")
    check(u["c"] == r["c"], f"{name}: measured c")
    mv = u.get("optimal_gamma_measured_v")
    og = a["optimal_gamma"]
    check(mv is not None and len(mv) == len(og) and
          all(x["c"] == y["c"] and x["gamma_iid"] == y["gamma_iid"] and close(x["factor_iid"], y["factor_iid"], 1e-9)
              for x, y in zip(mv, og)), f"{name}: optimal gamma with the measured c and v(n)")


def bad(args, what, out):
    before = set(os.listdir(os.path.dirname(out))) if os.path.isdir(os.path.dirname(out)) else set()
    p = sl("export-notebook", *args)
    after = set(os.listdir(os.path.dirname(out))) if os.path.isdir(os.path.dirname(out)) else set()
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and p.stdout == "" and after == before,
          f"{what}: exit 2, one line, nothing written ({p.returncode}: {p.stderr.strip()})")


def main():
    d = tempfile.mkdtemp(prefix="sl_notebook.")
    try:
        run(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"notebook: {n_checks} checks, {fail} failed")
    return 1 if fail else 0


def run(d):
    logs, nbd = os.path.join(d, "logs"), os.path.join(d, "nb")
    os.makedirs(logs)
    os.makedirs(nbd)
    base = ["measure", "--synthetic", "noisy", "--vocab", "300", "--sequences", "12", "--tokens", "48"]
    m32, m16, mnone = (os.path.join(logs, f) for f in ("m32.h5", "m16.h5", "mnone.h5"))
    for out, extra in ((m32, []), (m16, ["--dist", "float16", "--seed", "3", "--temperature", "0.8"]),
                       (mnone, ["--dist", "none", "--seed", "5"])):
        p = sl(*base, *extra, "--out", out)
        check(p.returncode == 0, f"measure {os.path.basename(out)}")
    # A run log of two tiny random models (as tests/cli/run_models.sh).
    cfg = lambda V, L, C, T: json.dumps({"vocab_size": V, "n_layer": L, "n_head": 4, "d_model": C, "d_ff": 4 * C,
                                         "max_seq_len": T})
    rl = os.path.join(logs, "run.h5")
    ok = sl("model", "init", "--arch", "gpt2", "--config", cfg(4096, 2, 64, 256), "--init-std", "0.2", "--out",
            os.path.join(d, "t.st"), "--seed", "1", "--tokenizer-json", os.path.join(ROOT, "models/tokenizer.json")).returncode == 0
    ok &= sl("model", "init", "--arch", "gpt2", "--config", cfg(4096, 1, 32, 256), "--init-std", "0.2", "--out",
             os.path.join(d, "d.st"), "--seed", "2").returncode == 0
    with open(os.path.join(d, "p.txt"), "w") as f, open(os.path.join(ROOT, "data/prompts/prose.txt")) as src:
        f.writelines(src.readlines()[:4])
    ok = ok and sl("run", "--target", "t.st", "--draft", "d.st", "--prompts", "p.txt", "--cost-reps", "3", "--boot", "50",
                   "--tokens", "24", "--gamma", "3", "--seed", "7", "--out", rl, cwd=d).returncode == 0
    check(ok, "run log of two tiny random models")
    all_logs = [m32, m16, mnone] + ([rl] if ok else [])

    # Export: relative paths, valid nbformat 4.5, unexecuted.
    nb_path = os.path.join(nbd, "all.ipynb")
    p = sl("export-notebook", *all_logs, "-o", nb_path)
    check(p.returncode == 0 and p.stdout.strip() == nb_path and p.stderr == "", f"export-notebook -o: {p.stderr.strip()}")
    check(sorted(os.listdir(nbd)) == ["all.ipynb"], "only the notebook in its folder (no temporary file)")
    nb = nbformat.read(nb_path, as_version=4)
    try:
        nbformat.validate(nb)
        valid = True
    except nbformat.ValidationError as e:
        print(e)
        valid = False
    check(valid and nb.nbformat == 4 and nb.nbformat_minor == 5, "nbformat.validate: nbformat 4.5")
    check(nb.metadata.kernelspec.name == "python3", "kernelspec python3")
    ids = [c.id for c in nb.cells]
    check(len(set(ids)) == len(ids), "cell ids unique")
    check(all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code"),
          "written unexecuted")
    check(nb.metadata.speclab.logs == ["../logs/" + os.path.basename(x) for x in all_logs],
          f"log paths relative to the notebook's folder: {nb.metadata.speclab.logs}")
    src = "".join(nb.cells[0].source)
    check(all(f"## Log {i + 1}: `../logs/{os.path.basename(x)}`" in src for i, x in enumerate(all_logs)),
          "title cell names every log")

    # The title's command rebuilds the synthetic float32 log bit for bit.
    cmd = re.search(r"```sh\n(speclab measure[^\n]*)\n```", src)
    redo = os.path.join(d, "redo")
    os.makedirs(redo)
    if cmd:
        argv = cmd.group(1).split()
        p = subprocess.run([S] + argv[1:], capture_output=True, text=True, cwd=redo)
        with h5py.File(m32) as f, h5py.File(os.path.join(redo, "m32.h5")) as g:
            same = all(np.array_equal(f[k][:], g[k][:]) for k in ("positions/beta", "positions/token", "distributions/p"))
        check(p.returncode == 0 and same, "the title's command reproduces the log (beta, tokens, p equal)")
    else:
        check(False, "the title holds a speclab measure command")

    # Execute from two working directories: same numbers; compare with speclab analyze.
    ex1, j1 = execute(nb_path, "all_exec1.ipynb", cwd="/")
    ex2, j2 = execute(nb_path, "all_exec2.ipynb", cwd=logs)
    check(j1 is not None and len(j1) == len(all_logs), "executed by jupyter nbconvert from / (one JSON line per log)")
    check(j1 is not None and j1 == j2, "executed twice, from two working directories: the same JSON")
    if j1:
        pngs = sum(1 for c in ex1.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
        check(pngs >= 4 * len(all_logs), f"figures inline ({pngs} PNG outputs)")
        for path, nbj in zip(all_logs, j1):
            name = os.path.basename(path)
            a = json.loads(sl("analyze", path, "--format", "json").stdout)
            compare_measure(name, nbj, a)
            if name == "run.h5":
                compare_run(name, nbj, a)

    # Bad input: exit 2, one line, no notebook, no temporary file.
    out = os.path.join(nbd, "bad.ipynb")
    bad([os.path.join(d, "missing.h5"), "-o", out], "missing log", out)
    junk = os.path.join(d, "junk.h5")
    with open(junk, "w") as f:
        f.write("not an HDF5 file\n")
    bad([junk, "-o", out], "non-HDF5 file", out)
    v2 = os.path.join(d, "v2.h5")
    shutil.copy(mnone, v2)
    with h5py.File(v2, "r+") as f:
        f.attrs["schema_version"] = np.int64(2)
    bad([v2, "-o", out], "schema version 2", out)
    bad([m32, mnone, "-o", out.replace(".ipynb", ".json")], "output not .ipynb", out)
    bad([m32, "-o", os.path.join(d, "nope", "x.ipynb")], "missing output folder", out)
    bad([m32], "no --out", out)
    bad(["-o", out], "no log", out)
    # An existing output is kept without --force, replaced with it.
    with open(nb_path) as f:
        old = f.read()
    bad([mnone, "-o", nb_path], "existing output without --force", nb_path)
    with open(nb_path) as f:
        check(f.read() == old, "existing output unchanged")
    p = sl("export-notebook", mnone, "--force", f"-o{nb_path}")
    nb2 = nbformat.read(nb_path, as_version=4)
    check(p.returncode == 0 and nb2.metadata.speclab.logs == ["../logs/mnone.h5"], "--force replaces it (-oFILE form)")
    p = sl("export-notebook", "--help")
    check(p.returncode == 0 and "--force" in p.stdout and "-o FILE" in p.stdout, "--help documents -o and --force")


if __name__ == "__main__":
    sys.exit(main())
