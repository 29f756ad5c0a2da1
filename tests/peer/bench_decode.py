#!/usr/bin/python3
"""Plain decoding speed of speclab against the engines a user would pick instead, on the same weights:
llama2.c's run.c (tests/peer/llama2c/) and llama.cpp (npm node-llama-cpp 3.21.1, prebuilt CPU library).
Run by tests/bench/peers.sh (`make bench`); tests/peer/README.md says what is compared and how.

    /usr/bin/python3 tests/peer/bench_decode.py [--rounds R] [--tokens N] [--threads 1,2] [--shape 110m|small]
                                                [--workdir DIR]

One random Llama (--shape 110m: llama2.c's stories110M shape, dim 768, 12 layers, 12 heads, vocab
32000, hidden 2048, seq_len 1024; `small`: dim 288, 6 layers, 6 heads, hidden 768, seq_len 256,
vocab 32000, stories15M's shape) with a SentencePiece-style vocabulary of 32000 made-up pieces is
written once by `speclab model init` and converted by `speclab model convert` to a llama2.c legacy
(version 0) checkpoint + tokenizer.bin, GGUF F32 and GGUF F16; speclab's f16 file is the GGUF F16
converted back to the native format (the same f16 numbers llama.cpp reads).

Every engine decodes greedily from BOS (token 1), N tokens, and is timed the way it times itself:
tokens per second over the forwards after the first one (the first one pays the page faults of the
memory-mapped weights):
  - run.c prints `achieved tok/s` = (steps - 1) / time after the first forward (`-n N -t 0`);
  - llama.cpp: tests/peer/llamacpp_probs.mjs bench --n N-1 (N-1 decodes timed after the first token);
  - speclab: `generate --autoregressive --tokens N` reports tokens/s over its whole decode, first forward
    included; the first forward is taken out by a second run with --tokens 1 right after it:
    (N - 1) / (wall_s(N) - wall_s(1)).
Runs alternate: within a round each pair runs back to back, the order flipped every round, and the
figures are medians over rounds; ratio = speclab / peer of the medians. Each comparison prints a
line `TARGET NAME value=RATIO target=>=1.1 unit=x MET|MISSED` (tests/bench/run_all.sh collects them).
run.c's printed continuation is checked against speclab's token ids (same weights, same tokens).
"""
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
SPECLAB = os.environ.get("SPECLAB", "build/speclab")
NPM_DIR = os.environ.get("LLAMACPP_NPM", os.path.join("build", "npm", "llamacpp"))
PKG = "node-llama-cpp@3.21.1"
RUN_C = os.environ.get("LLAMA2C_RUN_C", os.path.join("tests", "peer", "llama2c", "run.c"))
# sha256 of karpathy/llama2.c run.c at commit bd182289c596fa6059eb7b3b7c8ccd04b5c90fc3 (tests/peer/llama2c/README.md)
RUN_C_SHA256 = "9af3a7e37f0d6b1c864cb35b4c71e7bac4b4d2253e0b921084a6e252108dfb07"
RUN_BIN = os.path.join(os.environ.get("BUILD", "build"), "peer", "run")
TARGET_RATIO = 1.1
SHAPES = {
    "110m": {"vocab_size": 32000, "n_layer": 12, "n_head": 12, "d_model": 768, "d_ff": 2048, "max_seq_len": 1024},
    "small": {"vocab_size": 32000, "n_layer": 6, "n_head": 6, "d_model": 288, "d_ff": 768, "max_seq_len": 256},
}


def sh(cmd, env=None, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=check)


def make_tokenizer(path, vocab):
    """sp-bpe JSON (models/sl_tok.h): <unk>, <s>, </s>, 256 byte pieces, then made-up pieces ('▁', a-z and
    their concatenations) up to vocab. Only ids are decoded here; the pieces make run.c's output checkable."""
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    alpha = "\u2581abcdefghijklmnopqrstuvwxyz"
    level = [""]
    while len(pieces) < vocab:
        level = [p + c for p in level for c in alpha]
        pieces += level[:vocab - len(pieces)]
    tok = {"type": "sp-bpe", "pieces": pieces, "scores": [0.0] * 259 + [-float(i) for i in range(vocab - 259)],
           "types": [2, 3, 3] + [6] * 256 + [1] * (vocab - 259), "bos": 1, "eos": 2, "unk": 0, "add_bos": True,
           "add_eos": False, "add_dummy_prefix": True, "byte_fallback": True}
    with open(path, "w") as f:
        json.dump(tok, f)
    return pieces


def make_models(tmp, shape):
    pieces = make_tokenizer(os.path.join(tmp, "tok.json"), SHAPES[shape]["vocab_size"])
    m = {k: os.path.join(tmp, v) for k, v in {"f32": "m.safetensors", "llama2c": "m.bin", "gguf_f32": "m.f32.gguf",
                                                "gguf_f16": "m.f16.gguf", "f16": "m.f16.safetensors"}.items()}
    sh([SPECLAB, "model", "init", "--arch", "llama", "--config", json.dumps(SHAPES[shape]), "--out", m["f32"],
        "--seed", "1", "--tokenizer-json", os.path.join(tmp, "tok.json")])
    sh([SPECLAB, "model", "convert", m["f32"], m["llama2c"], "--to", "llama2c", "--version", "0"])
    sh([SPECLAB, "model", "convert", m["f32"], m["gguf_f32"], "--to", "gguf", "--dtype", "f32"])
    sh([SPECLAB, "model", "convert", m["f32"], m["gguf_f16"], "--to", "gguf", "--dtype", "f16"])
    sh([SPECLAB, "model", "convert", m["gguf_f16"], m["f16"]])
    m["llama2c_tok"] = os.path.join(tmp, "m.tokenizer.bin")
    return m, pieces


def build_run_c():
    """Compiles llama2.c's run.c as its Makefile's `runomp` does; returns None or the reason it cannot."""
    if not os.path.exists(RUN_C):
        return f"{RUN_C} is not there (tests/peer/llama2c/README.md says where it comes from)"
    with open(RUN_C, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != RUN_C_SHA256:
        return f"{RUN_C} is not the recorded run.c (sha256 {digest[:12]}..., expected {RUN_C_SHA256[:12]}...)"
    if not os.path.exists(RUN_BIN) or os.path.getmtime(RUN_BIN) < os.path.getmtime(RUN_C):
        os.makedirs(os.path.dirname(RUN_BIN), exist_ok=True)
        r = sh(["gcc", "-Ofast", "-fopenmp", "-march=native", RUN_C, "-lm", "-o", RUN_BIN], check=False)
        if r.returncode != 0:
            return f"gcc could not build run.c: {r.stderr.strip()[-300:]}"
    return None


def install_llamacpp():
    """node-llama-cpp 3.21.1 into its own prefix, as tests/cli/gguf_llamacpp.py does; None or the reason not."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node/npm not available"
    pkg_json = os.path.join(NPM_DIR, "node_modules", "node-llama-cpp", "package.json")
    if os.path.exists(pkg_json):
        return None
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    if sys.platform != "linux" or arch is None:
        return f"no prebuilt llama.cpp CPU package for {sys.platform}/{platform.machine()}"
    os.makedirs(NPM_DIR, exist_ok=True)
    try:
        r = sh(["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund", "--no-save", "--omit=optional",
                "--ignore-scripts", PKG, f"@node-llama-cpp/linux-{arch}@3.21.1"], check=False)
    except OSError as e:
        return f"npm could not install {PKG}: {e}"
    if r.returncode != 0 or not os.path.exists(pkg_json):
        return f"npm could not install {PKG}: {r.stderr.strip()[-300:]}"
    return None


def speclab_wall(model, threads, n):
    r = sh([SPECLAB, "generate", "--autoregressive", "--target", model, "--prompt-ids", "1", "--tokens", str(n),
            "--temperature", "0", "--eos", "-1", "--format", "json"], env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    d = json.loads(r.stdout)
    return d["decoding"][0]["wall_s"], [int(x) for x in d["generation"][0]["token_ids"].split(",")]


def speclab_rate(model, threads, n, ids_out=None):
    wall_n, ids = speclab_wall(model, threads, n)
    wall_1, _ = speclab_wall(model, threads, 1)
    if ids_out is not None:
        ids_out[:] = ids
    return (n - 1) / (wall_n - wall_1)


def run_c_rate(m, threads, n, pieces, ids):
    r = sh([RUN_BIN, m["llama2c"], "-z", m["llama2c_tok"], "-t", "0", "-n", str(n), "-s", "1"],
           env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    got = re.search(r"achieved tok/s: ([0-9.]+)", r.stderr)
    if ids:
        # tokenizer.bin holds '▁' as ' ' (llama2.c's tokenizer.py); run.c drops the space of a piece after BOS
        text = [pieces[t].replace("\u2581", " ") for t in ids]
        want = "".join([text[0][1:] if text[0].startswith(" ") else text[0]] + text[1:])
        if r.stdout.rstrip("\n") != want:
            raise SystemExit(f"run.c's continuation differs from speclab's on the same weights:\n"
                             f"  run.c:   {r.stdout[:120]!r}\n  speclab: {want[:120]!r}")
    return float(got.group(1))


def llamacpp_rate(gguf, threads, n):
    r = sh(["node", "tests/peer/llamacpp_probs.mjs", "bench", gguf, "--n", str(n - 1), "--threads", str(threads),
            "--first", "1"], env=dict(os.environ, LLAMACPP_NPM=os.path.abspath(NPM_DIR)), check=False)
    if r.returncode != 0:
        raise RuntimeError(f"llamacpp_probs.mjs exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)["tokens_per_s"]


FAMILY = os.path.join("models", "family")


def spec_inputs(tmp):
    """The shipped pair (target and its distilled draft) as GGUF, and the first 32 tokens of the first prose prompt."""
    t, d = os.path.join(FAMILY, "target.safetensors"), os.path.join(FAMILY, "draft-s-distilled.safetensors")
    tg, dg = os.path.join(tmp, "target.gguf"), os.path.join(tmp, "draft.gguf")
    sh([SPECLAB, "model", "convert", t, tg, "--to", "gguf"])
    sh([SPECLAB, "model", "convert", d, dg, "--to", "gguf"])
    with open(os.path.join("data", "prompts", "prose.txt")) as f, open(os.path.join(tmp, "p.txt"), "w") as g:
        g.write(f.readline())
    ids = sh([SPECLAB, "tokenize", "encode", "--tokenizer", t, "--in", os.path.join(tmp, "p.txt")]).stdout.split()[:32]
    return t, d, tg, dg, ",".join(ids)


def speclab_spec(t, d, ids, threads, n, gamma):
    """Whole decode of n + 1 tokens, prompt scoring included: returns (tokens/s, ids, alpha_hat or None)."""
    cmd = [SPECLAB, "generate", "--target", t, "--prompt-ids", ids, "--tokens", str(n + 1), "--temperature", "0",
           "--eos", "-1", "--format", "json"]
    cmd += ["--autoregressive"] if gamma == 0 else ["--draft", d, "--gamma", str(gamma)]
    r = json.loads(sh(cmd, env=dict(os.environ, OMP_NUM_THREADS=str(threads))).stdout)
    summ = r["decoding" if gamma == 0 else "acceptance"][0]
    out = [int(x) for x in r["generation"][0]["token_ids"].split(",")]
    return (n + 1) / summ["wall_s"], out, summ.get("alpha_hat")


def llamacpp_spec(tg, dg, ids, threads, n, gamma):
    cmd = ["node", "tests/peer/llamacpp_spec.mjs", tg, dg, "--ids", ids, "--n", str(n), "--threads", str(threads)]
    cmd += ["--autoregressive"] if gamma == 0 else ["--gamma", str(gamma)]
    r = sh(cmd, env=dict(os.environ, LLAMACPP_NPM=os.path.abspath(NPM_DIR)), check=False)
    if r.returncode != 0:
        raise RuntimeError(f"llamacpp_spec.mjs exit {r.returncode}: {r.stderr.strip()[-300:]}")
    d = json.loads(r.stdout)
    p = d["predictions"]
    acc = p["validated"] / (p["validated"] + p["refuted"]) if p and p["validated"] + p["refuted"] else None
    return (n + 1) / (d["first_token_s"] + d["seconds"]), d["token_ids"], acc


def run_spec(rounds, n, thread_list, tmp, gamma=4):
    """Speculative decoding, greedy, gamma 4, the shipped pair: speclab `generate --draft` against node-llama-cpp's
    DraftSequenceTokenPredictor (llamacpp_spec.mjs), each with its own autoregressive decoding for reference."""
    t, d, tg, dg, ids = spec_inputs(tmp)
    print(f"\nspeculative decoding: shipped target + draft-s-distilled (GGUF for llama.cpp), 32-token prose prompt, "
          f"{n + 1} greedy tokens, gamma {gamma}; tokens/s over the whole decode, prompt included (both report it)")
    res = {}
    for rnd in range(rounds):
        for threads in thread_list:
            runs = [("speclab", g, lambda g=g: speclab_spec(t, d, ids, threads, n, g)) for g in (gamma, 0)]
            runs += [("llama.cpp", g, lambda g=g: llamacpp_spec(tg, dg, ids, threads, n, g)) for g in (gamma, 0)]
            if rnd % 2:
                runs = runs[2:] + runs[:2]
            line = []
            for who, g, fn in runs:
                try:
                    rate, out, acc = fn()
                except (RuntimeError, subprocess.CalledProcessError) as e:
                    print(f"round {rnd} threads {threads} {who} gamma {g}: failed: {e}")
                    continue
                res.setdefault((who, g, threads), []).append(rate)
                res.setdefault((who, "ids"), out)
                if acc is not None:
                    res.setdefault((who, "acc"), acc)
                line.append(f"{who} {'spec' if g else 'AR'} {rate:6.2f}")
            print(f"round {rnd} threads {threads}: " + ", ".join(line) + " tokens/s", flush=True)
    a, b = res.get(("speclab", "ids"), []), res.get(("llama.cpp", "ids"), [])
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print(f"acceptance (accepted / drafted): speclab {res.get(('speclab', 'acc'), float('nan')):.3f}, llama.cpp "
          f"{res.get(('llama.cpp', 'acc'), float('nan')):.3f} (validated / (validated + refuted)); the two continuations "
          f"agree on their first {same} of {min(len(a), len(b))} tokens")
    lines = []
    for threads in thread_list:
        med = {k: statistics.median(res[k + (threads,)]) for k in
               (("speclab", gamma), ("speclab", 0), ("llama.cpp", gamma), ("llama.cpp", 0)) if k + (threads,) in res}
        if ("speclab", gamma) not in med or ("llama.cpp", gamma) not in med:
            continue
        ratio = med[("speclab", gamma)] / med[("llama.cpp", gamma)]
        own = lambda w: med[(w, gamma)] / med[(w, 0)] if (w, 0) in med else float("nan")
        print(f"  threads {threads}: speclab spec {med[('speclab', gamma)]:.2f} tokens/s ({own('speclab'):.2f}x its AR), "
              f"llama.cpp spec {med[('llama.cpp', gamma)]:.2f} ({own('llama.cpp'):.2f}x its AR): ratio {ratio:.3f} "
              f"(target >= {TARGET_RATIO}) {'MET' if ratio >= TARGET_RATIO else 'MISSED'}")
        lines.append(f"TARGET peers.llamacpp.spec.t{threads} value={ratio:.4f} target=>={TARGET_RATIO} unit=x "
                     f"{'MET' if ratio >= TARGET_RATIO else 'MISSED'}")
    return lines


def main(argv):
    rounds, n, thread_list, shape, workdir, spec, plain = 3, 128, [1, 2], "110m", None, True, True
    i = 0
    while i < len(argv):
        k = argv[i]
        v = argv[i + 1] if i + 1 < len(argv) else None
        if v is None:
            raise SystemExit(f"bench_decode: {k} needs a value")
        if k == "--rounds": rounds = int(v)
        elif k == "--tokens": n = int(v)
        elif k == "--threads": thread_list = [int(x) for x in v.split(",")]
        elif k == "--shape" and v in SHAPES: shape = v
        elif k == "--workdir": workdir = v
        elif k == "--spec": spec = v != "0"
        elif k == "--plain": plain = v != "0"
        else: raise SystemExit(f"bench_decode: unknown option {k} {v}")
        i += 2
    tmp = workdir or tempfile.mkdtemp(prefix="bench_decode.")
    os.makedirs(tmp, exist_ok=True)
    try:
        return run(rounds, n, thread_list, shape, tmp, spec, plain)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def stream_gbs(threads):
    """The STREAM-like read bandwidth now at that many threads (bench_engine's pass over 1 GiB, best of 9),
    or None where bench_engine is not built."""
    exe = os.path.join(os.environ.get("BUILD", "build"), "bench", "bench_engine")
    if not os.access(exe, os.X_OK):
        return None
    out = subprocess.run([exe], env=dict(os.environ, OMP_NUM_THREADS=str(threads), BENCH_ENGINE_PARTS="stream"),
                         capture_output=True, text=True).stdout
    m = re.search(r"best of \d+\): ([0-9.]+) GB/s", out)
    return float(m.group(1)) if m else None


def weight_bytes_per_token(path):
    """Bytes of the matrices one decoded token reads from a speclab model file: every 2-D tensor but
    the token embedding (one row of it is read), which counts whole when it is also the unembedding."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        h = json.loads(f.read(n))
    mats = {k: v for k, v in h.items() if k != "__metadata__" and len(v["shape"]) == 2}
    size = {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in mats.items()}
    emb = [k for k in size if k.startswith("tok_emb")]
    tied = not any(k.startswith("lm_head") for k in size)
    return sum(b for k, b in size.items() if k not in emb or tied)


def roofline(res, m, gbs):
    """Each thread count's decodes against the STREAM-like pass at that thread count: a memory-bound decode
    cannot read its weights much faster than that pass, so a peer already near it leaves no room for 1.1x."""
    for threads in sorted({t for _, t in res}):
        g = gbs.get(threads, [])
        if not g:
            print(f"\nthe STREAM-like bandwidth at {threads} thread(s): not measured (build/bench/bench_engine is built "
                  f"by make bench)")
            continue
        best = max(g)
        print(f"\n{threads} thread(s) against the STREAM-like read pass at {threads} thread(s) (bench_engine, 1 GiB, "
              f"best of 9; taken before each round: {', '.join(f'{x:.1f}' for x in g)} GB/s, best {best:.1f}):")
        for (name, th), v in sorted(res.items()):
            if th != threads:
                continue
            dt = "f16" if name.endswith("f16") else "f32"
            wb = weight_bytes_per_token(m[dt])
            a, b = statistics.median(v["speclab"]) * wb / 1e9, statistics.median(v["peer"]) * wb / 1e9
            line = (f"  {name}: {wb / 1e6:.0f} MB of weights per token; speclab reads {a:.1f} GB/s ({100 * a / best:.0f}% "
                    f"of the pass), the peer {b:.1f} GB/s ({100 * b / best:.0f}%)")
            if b * TARGET_RATIO > best and a <= best:
                line += (f"; {TARGET_RATIO}x the peer would read {b * TARGET_RATIO:.1f} GB/s, above the pass: out of "
                         f"reach at {threads} thread(s) in this run")
            print(line)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(rounds, n, thread_list, shape, tmp, spec, plain):
    load0 = loadavg()
    m, pieces = make_models(tmp, shape) if plain else (None, None)
    cfg = SHAPES[shape]
    if plain:
        print(f"model: random Llama, shape {shape} ({json.dumps(cfg)}); {n} greedy tokens after BOS; "
              f"{rounds} rounds, runs alternated; threads {','.join(map(str, thread_list))}")
    no_run_c = build_run_c()
    no_llamacpp = install_llamacpp()
    if no_run_c:
        print(f"SKIP llama2.c run.c: {no_run_c}")
    if no_llamacpp:
        print(f"SKIP llama.cpp: {no_llamacpp}")
    print("llama2.c f16: not offered (run.c reads float32 checkpoints only; its runq.c is Q8_0)")
    # comparisons: (name, speclab model, peer kind, peer file)
    pairs = []
    if not plain:
        pass
    elif not no_run_c:
        pairs.append(("llama2c.f32", "f32", "run.c", None))
    if plain and not no_llamacpp:
        pairs += [("llamacpp.f32", "f32", "llama.cpp", m["gguf_f32"]), ("llamacpp.f16", "f16", "llama.cpp", m["gguf_f16"])]
    res = {}
    ids = {}
    gbs = {}
    for rnd in range(rounds):
        for threads in thread_list:
            g = stream_gbs(threads) if pairs else None
            if g:
                gbs.setdefault(threads, []).append(g)
            for name, dt, kind, f in pairs:
                key = (name, threads)
                ref = []

                def ours():
                    return speclab_rate(m[dt], threads, n, ref)

                def theirs():
                    if kind == "run.c":
                        return run_c_rate(m, threads, n, pieces, ids.get((dt, threads)) or ref)
                    return llamacpp_rate(f, threads, n)

                order = [("speclab", ours), ("peer", theirs)] if rnd % 2 == 0 else [("peer", theirs), ("speclab", ours)]
                got = {}
                for who, fn in order:
                    try:
                        got[who] = fn()
                    except (RuntimeError, subprocess.CalledProcessError) as e:
                        print(f"round {rnd} threads {threads} {name} {who}: failed: {e}")
                        got = None
                        break
                    if who == "speclab":
                        ids.setdefault((dt, threads), list(ref))
                if got is None:
                    continue
                res.setdefault(key, {"speclab": [], "peer": []})
                for who in ("speclab", "peer"):
                    res[key][who].append(got[who])
                print(f"round {rnd} threads {threads} {name:13s} speclab {got['speclab']:7.2f}  {kind:9s} "
                      f"{got['peer']:7.2f} tokens/s", flush=True)
    if res:
        summary(res, n, rounds)
        roofline(res, m, gbs)
    spec_lines = []
    if spec and not no_llamacpp:
        spec_lines = run_spec(rounds, n, thread_list, tmp)
    print("llama2.c speculative decoding: not offered (run.c decodes one model)")
    print(f"load average at start {load0}, at end {loadavg()} on {os.cpu_count()} cores (a 2-thread run needs both "
          f"cores free: read its figures with this)")
    for (name, threads), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ratio = statistics.median(v["speclab"]) / statistics.median(v["peer"])
        print(f"TARGET peers.{name}.t{threads} value={ratio:.4f} target=>={TARGET_RATIO} unit=x "
              f"{'MET' if ratio >= TARGET_RATIO else 'MISSED'}")
    for line in spec_lines:
        print(line)
    return 0


def summary(res, n, rounds):
    print(f"\n{n} tokens after BOS, greedy; tokens/s after the first forward, median of {rounds} alternated rounds "
          f"(the machine may be shared: runs alternate so that load hits both sides)")
    print(f"  {'comparison':14s} {'threads':>7s} {'speclab':>8s} {'peer':>8s} {'ratio':>6s}  target")
    for (name, threads), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        a, b = statistics.median(v["speclab"]), statistics.median(v["peer"])
        ratio = a / b
        ok = "MET" if ratio >= TARGET_RATIO else "MISSED"
        print(f"  {name:14s} {threads:7d} {a:8.2f} {b:8.2f} {ratio:6.3f}  >= {TARGET_RATIO} {ok}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
