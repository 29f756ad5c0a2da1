#!/usr/bin/python3
"""GGUF files against llama.cpp itself: next-token probabilities, llama.cpp's view of the file,
and tokenization.

The peer is llama.cpp's prebuilt CPU library as shipped by the npm package node-llama-cpp 3.21.1,
driven by tests/peer/llamacpp_probs.mjs (options and measurements in tests/peer/README.md). It is
installed here into build/npm/llamacpp (git-ignored; its own prefix, because an `npm install
--no-save` into build/npm by another test prunes every package that install did not name).

Models (all stored F16), written as GGUF by `speclab model convert IN OUT --to gguf [--dtype D]` and
by the independent numpy writer tests/importers/gguf_write.py [--dtype D]: 8 files + 1.
  target    models/family/target.safetensors: gpt2, byte-level BPE vocabulary of 4096. GGUF F16.
  llama     `speclab model init --arch llama`: 2 layers, grouped-query attention 4/2 heads, head
            dim 16, untied output, the same tokenizer; init std 0.25 so that attention is sharp and
            RoPE matters (with the default 0.02 the permuted layout below moves the probabilities by
            only 2.6e-6). GGUF F32 and Q8_0.
  llama-sp  the same with 1 layer and a SentencePiece vocabulary (sp-bpe, 4129 pieces, built below
            from the byte-level one), so that llama.cpp's SPM tokenizer is compared too. GGUF F16.

For a fixed 32-token sequence, llama.cpp's full next-token distribution at every position (all
n_vocab tokens) is compared with speclab's (`speclab model probs`: softmax in double of the float32
logits) from the native file. Checks and tolerances:
  - speclab on each F16/F32 GGUF == speclab on the native file, exactly (same weights; speclab
    computes in float32 whatever the stored type, and its F16 and F32 paths give identical logits).
    Q8_0: both writers' files read identically, and llama.cpp is compared with speclab's reading
    of the Q8_0 file (the quantised weights), not with the native file.
  - max |p_llama.cpp - p_speclab| over all positions and tokens, bound by (arch, GGUF type):
      llama F32: 1e-5. Measured 3.4e-7: float32 on both sides; only the summation order and
                 llama.cpp's float32 exp/softmax differ. 29x margin.
      gpt2 F32:  1e-3 (no such file by default: 220 MB more to write and read). Measured 1.9e-4
                 (2.9e-4 on random ids). llama.cpp's CPU GELU is a float16 lookup table
                 (ggml-cpu/vec.h, GGML_GELU_FP16: f16(gelu(f16(x))) for |x| < 10), an error of
                 ~2^-11 relative on every MLP activation: a numpy float64 forward with that rounding
                 matches llama.cpp to 3.8e-5; without it, it matches speclab to 2.5e-7.
      F16:       2e-3. ggml multiplies F16 weights by activations rounded to F16 (vec_dot_type
                 F16), except on the AMX path (CPU variant sapphirerapids, picked at run time where
                 the CPU has AMX) for matrices whose row count is a multiple of 32, which keeps them
                 float32. Measured with AMX: target 1.9e-4 (as F32: the F16 file gives bit-identical
                 probabilities), llama-sp 1.5e-4 (4129 output rows: that matrix is off the AMX path;
                 with 4096 or 4160 rows, 4e-7); without AMX (the package with
                 libggml-cpu-sapphirerapids.so removed: avx512 variant): target 6.9e-4, llama-sp
                 2.0e-4 (and the 2-layer llama, F16, 5.4e-4). 2.9x margin over the worst.
      llama Q8_0: 3e-2. speclab dequantises the blocks and computes in float32; ggml quantises the
                 activations to Q8_0 too (vec_dot_type Q8_0, 8-bit per block of 32). Measured 9.7e-3
                 with and without AMX (3.1x margin); the argmax differs at 4 of 32 positions, all near
                 ties (the llama's distributions are flat, top probability ~0.1), excused as below.
                 What it proves: llama.cpp reads the Q8_0 blocks as speclab and gguf_write.py write
                 them (measured: the blocks of each row rotated by one move probabilities by 0.25).
  - argmax equal at every position; a position whose top two speclab probabilities are within
    2 x bound is excused and counted (Q8_0: 4; F16 without AMX: 1 for llama-sp; otherwise none).
  - RoPE layout: the llama GGUF rows of attn_q/attn_k are the native rows (Meta's adjacent pairs
    (2j, 2j+1); llama.cpp's llama arch uses rope type NORM, which rotates adjacent pairs). The other
    hypothesis, rows permuted within each head to Hugging Face's half-split order, is written too
    (gguf_write.py on a permuted copy, F32) and must disagree with speclab by more than 1e-2
    (measured 0.29, argmax differs at 29 of 32 positions): the comparison sees a layout error.
  - llama.cpp's view of each file: architecture, n_vocab, n_ctx_train = max_seq_len, tokenizer
    model "gpt2" with pre-tokenizer "gpt-2" and BOS = EOS = <|endoftext|>, no BOS added (byte-level
    BPE), or "llama" with the JSON's bos, eos, add_bos, add_eos (sp-bpe).
  - tokenization, on the F16 files (target and llama-sp, both writers): llama.cpp's tokenizer
    (gpt2 / "gpt-2" pre-tokenizer, or SPM) vs `speclab tokenize encode --tokenizer FILE.gguf`, same
    file, on the 357 varied strings of tests/cli/test_tokenize_gpt2.py: identical ids
    (tokenization is discrete; llama.cpp is asked without BOS/EOS, so speclab's added BOS comes off
    first). Measured: 357/357 for each.

Skips (exit 0 with a SKIP line) only when node/npm is missing, npm cannot install the package, or
llama.cpp's prebuilt library cannot load on this machine.
"""
import importlib.util
import csv
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
SPECLAB = os.environ.get("SPECLAB", "build/speclab")
# LLAMACPP_NPM: another npm prefix holding the package (e.g. a copy without the AMX CPU variant).
NPM_DIR = os.environ.get("LLAMACPP_NPM", os.path.join("build", "npm", "llamacpp"))
PKG = "node-llama-cpp@3.21.1"
PEER = "tests/peer/llamacpp_probs.mjs"
GGUF_WRITE = os.environ.get("GGUF_WRITE", "tests/importers/gguf_write.py")  # override: developing on another branch
TARGET = "models/family/target.safetensors"
TEXT = ("The committee met on Tuesday to discuss the budget. After a long debate, they agreed that the "
        "new library would open in the spring, and that its first exhibition would show maps of the old city.")
N_TOKENS = 32
LLAMA_CFG = {"vocab_size": 4096, "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 64, "d_ff": 128,
             "max_seq_len": 64, "rope_theta": 10000, "tied_embeddings": False}
# max |p_llama.cpp - p_speclab| by (arch, GGUF weight type); see the docstring for the measurements.
BOUND = {("llama", "f32"): 1e-5, ("gpt2", "f32"): 1e-3, ("llama", "f16"): 2e-3, ("gpt2", "f16"): 2e-3,
         ("llama", "q8_0"): 3e-2}
PERMUTED_MIN = 1e-2
ENV1 = dict(os.environ, OMP_NUM_THREADS="1")


def platform_package():
    machine = platform.machine()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine.lower())
    if sys.platform != "linux" or arch is None:
        return None
    return f"@node-llama-cpp/linux-{arch}@3.21.1"


def install():
    pkg_json = os.path.join(NPM_DIR, "node_modules", "node-llama-cpp", "package.json")
    if not os.path.exists(pkg_json):
        plat = platform_package()
        if plat is None:
            print(f"SKIP: no prebuilt llama.cpp CPU package for {sys.platform}/{platform.machine()}")
            return False
        os.makedirs(NPM_DIR, exist_ok=True)
        # Only this platform's CPU binaries: the optional CUDA/Vulkan packages are ~600 MB.
        cmd = ["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund", "--no-save", "--omit=optional",
               "--ignore-scripts", PKG, plat]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"SKIP: npm could not install {PKG}: {e}")
            return False
        if r.returncode != 0 or not os.path.exists(pkg_json):
            print(f"SKIP: npm could not install {PKG} (registry unreachable?): {r.stderr.strip()[-300:]}")
            return False
    return True


def peer(*args):
    """Runs the node script; returns parsed JSON, or None after printing SKIP when llama.cpp cannot load."""
    env = dict(os.environ, LLAMACPP_NPM=os.path.abspath(NPM_DIR))
    r = subprocess.run(["node", PEER, *args], capture_output=True, text=True, env=env)
    if r.returncode == 3:
        print(f"SKIP: llama.cpp's prebuilt library cannot be used here: {r.stderr.strip()[-300:]}")
        return None
    if r.returncode != 0:
        raise RuntimeError(f"node {PEER} {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def speclab(*args):
    r = subprocess.run([SPECLAB, *args], capture_output=True, text=True, env=ENV1)
    if r.returncode != 0:
        raise RuntimeError(f"speclab {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    return r.stdout


def speclab_probs(model, ids):
    out = json.loads(speclab("model", "probs", model, "--prompt-ids", ",".join(map(str, ids))))
    return np.array(out["probs"], dtype=np.float64)


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def write_permuted(src, dst, n_head, n_kv_head, head_dim):
    """Copy of a llama safetensors whose q/k rows are in Hugging Face's order: within each head,
    rows (0, 2, 4, ..., 1, 3, 5, ...) of the native (adjacent-pair) layout."""
    header, data = read_st(src)
    data = bytearray(data)
    for name, e in header.items():
        if name == "__metadata__" or not (name.endswith("attn.q.weight") or name.endswith("attn.k.weight")):
            continue
        dt = {"F32": "<f4", "F16": "<f2"}[e["dtype"]]
        b, end = e["data_offsets"]
        w = np.frombuffer(bytes(data[b:end]), dtype=dt).reshape(e["shape"])
        nh = n_head if name.endswith("q.weight") else n_kv_head
        w = w.reshape(nh, head_dim // 2, 2, -1).swapaxes(1, 2).reshape(e["shape"])
        data[b:end] = np.ascontiguousarray(w, dtype=dt).tobytes()
    hj = json.dumps(header).encode()
    hj += b" " * ((-len(hj) - 8) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + bytes(data))


def gpt2_byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: the character of a byte-level token -> its byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def make_sp_tokenizer(byte_bpe):
    """A SentencePiece-style vocabulary (sp-bpe JSON, models/sl_tok.h) made from the byte-level BPE
    one, so that both of llama.cpp's tokenizers are exercised without another download: <unk>, <s>,
    </s>, the 256 byte pieces, then every byte-level token whose bytes are valid UTF-8 with no
    control character (spaces as '▁'), scored -rank in BPE order, then every character of those
    pieces that is not yet a piece (as SentencePiece's training guarantees; their scores never
    matter: a merge joins two symbols).
    The encoder is the same algorithm on both sides whatever the scores; what is compared is
    llama.cpp's SPM tokenizer against speclab's, on the same GGUF."""
    dec = gpt2_byte_decoder()
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(pieces)
    seen = set(pieces)
    specials = set(byte_bpe.get("special", {}).values())
    for i, t in enumerate(byte_bpe["vocab"]):
        if i in specials:
            continue
        try:
            text = bytes(dec[c] for c in t).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        text = text.replace(" ", "\u2581")
        if any(ord(c) < 0x20 or ord(c) == 0x7f for c in text):
            continue  # as in llama's vocabulary: control characters go through the byte pieces
        if text and text not in seen:
            seen.add(text)
            pieces.append(text)
            types.append(1)
            scores.append(-float(i))
    for ch in sorted({c for p in pieces[259:] for c in p} - seen):
        pieces.append(ch)
        types.append(1)
        scores.append(-1e6)
    return {"type": "sp-bpe", "pieces": pieces, "scores": scores, "types": types, "bos": 1, "eos": 2, "unk": 0,
            "add_bos": True, "add_eos": False, "add_dummy_prefix": True, "byte_fallback": True}


def load_cases():
    spec = importlib.util.spec_from_file_location("tok_gpt2", os.path.join("tests", "cli", "test_tokenize_gpt2.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.cases()


ROWS = []  # one per compared file: the measured differences (written by --doc)


def compare(name, arch, dtype, ours, theirs, failures):
    """ours: speclab (n, V) in double; theirs: the peer's JSON."""
    bound = BOUND[(arch, dtype)]
    q = np.array(theirs["probs"], dtype=np.float64)
    if q.shape != ours.shape:
        failures.append(f"{name}: llama.cpp gave {q.shape} probabilities, speclab {ours.shape}")
        return None
    d = np.abs(ours - q)
    worst = float(d.max())
    tv = float(0.5 * d.sum(1).max())
    am_ours = ours.argmax(1)
    am_theirs = np.array(theirs["argmax"])
    top2 = np.sort(ours, 1)[:, -2:]
    differ = am_ours != am_theirs
    excused = differ & (top2[:, 1] - top2[:, 0] < 2 * bound)
    print(f"  max |p_llama.cpp - p_speclab| = {worst:.2e} (bound {bound:.0e}), "
          f"max total variation {tv:.2e}, argmax equal at {int((~differ).sum())}/{len(am_ours)} positions"
          + (f" ({int(excused.sum())} near-ties excused)" if excused.any() else ""))
    ROWS.append({"file": name, "bound": f"{bound:.0e}", "max_abs_diff": f"{worst:.2e}", "max_tv": f"{tv:.2e}",
                 "argmax_equal": f"{int((~differ).sum())}/{len(am_ours)}", "near_ties_excused": str(int(excused.sum()))})
    if worst > bound:
        failures.append(f"{name}: max |p - q| = {worst:.3e} > {bound:.0e}")
    if (differ & ~excused).any():
        j = int(np.argmax(differ & ~excused))
        failures.append(f"{name}: argmax differs at position {j}: llama.cpp {am_theirs[j]}, speclab {am_ours[j]}")
    return worst


def check_info(name, info, arch, n_ctx, tok, failures):
    """tok: the tokenizer JSON the model carries."""
    if tok["type"] == "byte-bpe":
        eot = tok["special"]["<|endoftext|>"]
        want = {"n_vocab": len(tok["vocab"]), "tokenizer_model": "gpt2", "tokenizer_pre": "gpt-2", "bos": eot,
                "eos": eot, "add_bos": False}
    else:
        want = {"n_vocab": len(tok["pieces"]), "tokenizer_model": "llama", "bos": tok["bos"], "eos": tok["eos"],
                "add_bos": tok["add_bos"], "add_eos": tok["add_eos"]}
    want.update({"architecture": arch, "n_ctx_train": n_ctx})
    bad = {k: (info.get(k), v) for k, v in want.items() if info.get(k) != v}
    print(f"  llama.cpp sees arch {info.get('architecture')}, n_vocab {info.get('n_vocab')}, "
          f"n_ctx_train {info.get('n_ctx_train')}, tokenizer {info.get('tokenizer_model')}/{info.get('tokenizer_pre')}, "
          f"bos {info.get('bos')} eos {info.get('eos')}, add_bos {info.get('add_bos')}: "
          + ("as written" if not bad else f"MISMATCH {bad}"))
    if bad:
        failures.append(f"{name}: llama.cpp's view differs (got, want): {bad}")


def compare_tokens(name, gguf, cases, strs, ref, tok, failures):
    """speclab encodes with the tokenizer's add_bos/add_eos; llama.cpp was asked without them
    (add_special = false), so those ids come off speclab's lines first (and must be there)."""
    r = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", gguf, "--jsonl", "--in", cases],
                       capture_output=True, text=True, env=ENV1)
    if r.returncode != 0:
        failures.append(f"{name}: speclab tokenize encode --tokenizer exited {r.returncode}: "
                        f"{r.stderr.strip()[-300:]}")
        print(f"  tokenization: speclab cannot tokenize with the GGUF's tokenizer")
        return
    ours = r.stdout.split("\n")[: len(strs)]
    if tok["type"] == "sp-bpe":
        trimmed = []
        for line in ours:
            ids = line.split()
            if tok["add_bos"]:
                ids = ids[1:] if ids and ids[0] == str(tok["bos"]) else ["missing-BOS"] + ids
            if tok["add_eos"]:
                ids = ids[:-1] if ids and ids[-1] == str(tok["eos"]) else ids + ["missing-EOS"]
            trimmed.append(" ".join(ids))
        ours = trimmed
    bad = 0
    for s, a, b in zip(strs, ref, ours):
        if " ".join(map(str, a)) != b:
            bad += 1
            if bad <= 5:
                print(f"  MISMATCH on {s!r}:\n    llama.cpp: {' '.join(map(str, a))}\n    speclab:   {b}")
    if len(ours) != len(strs) or len(ref) != len(strs):
        bad = max(bad, 1)
    kind = "gpt2 / gpt-2 pre-tokenizer" if tok["type"] == "byte-bpe" else "SPM (llama)"
    print(f"  tokenization (llama.cpp {kind} vs speclab, same GGUF): "
          f"{len(strs) - bad}/{len(strs)} strings identical")
    if bad:
        failures.append(f"{name}: tokenization: {bad}/{len(strs)} strings differ")


def main():
    t_start = t_files = t_peer = time.time()
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("SKIP: node/npm not available")
        return 0
    if not install():
        return 0
    failures = []
    tmp = tempfile.mkdtemp(prefix="gguf_llamacpp.")
    try:
        llama = os.path.join(tmp, "llama.safetensors")
        speclab("model", "init", "--arch", "llama", "--config", json.dumps(LLAMA_CFG), "--tokenizer-json",
                "models/tokenizer.json", "--init-std", "0.25", "--seed", "7", "--dtype", "f16", "--out", llama)
        with open("models/tokenizer.json", encoding="utf-8") as f:
            bpe_tok = json.load(f)
        sp_tok = make_sp_tokenizer(bpe_tok)
        sp_json = os.path.join(tmp, "sp.json")
        with open(sp_json, "w", encoding="utf-8") as f:
            json.dump(sp_tok, f)
        llama_sp = os.path.join(tmp, "llama_sp.safetensors")
        sp_cfg = dict(LLAMA_CFG, vocab_size=len(sp_tok["pieces"]), n_layer=1)
        speclab("model", "init", "--arch", "llama", "--config", json.dumps(sp_cfg), "--tokenizer-json", sp_json,
                "--init-std", "0.25", "--seed", "8", "--dtype", "f16", "--out", llama_sp)
        r = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", TARGET], input=TEXT.encode(),
                           capture_output=True, env=ENV1, check=True)
        ids = [int(x) for x in r.stdout.split()][:N_TOKENS]
        assert len(ids) == N_TOKENS, ids
        print(f"sequence: {N_TOKENS} ids of a fixed English sentence ({','.join(map(str, ids[:8]))},...); "
              f"peer {PKG}, CPU, 1 thread, f32 KV cache, flash attention off")

        strs = load_cases()
        cases = os.path.join(tmp, "cases.jsonl")
        with open(cases, "w", encoding="utf-8") as f:
            for x in strs:
                f.write(json.dumps(x, ensure_ascii=True) + "\n")

        # Phase 1: the GGUF files and speclab's probabilities.
        # (label, arch, file, n_ctx_train, tokenizer, GGUF weight types). All natives are F16: "f16"
        # keeps the weights' type. The target's F32 files would add 220 MB of writing and reading
        # for a check the small llama makes sharper; llama-sp covers the llama arch at F16.
        models = [("target", "gpt2", TARGET, 256, bpe_tok, ("f16",)),
                  ("llama", "llama", llama, LLAMA_CFG["max_seq_len"], bpe_tok, ("f32", "q8_0")),
                  ("llama-sp", "llama", llama_sp, LLAMA_CFG["max_seq_len"], sp_tok, ("f16",))]
        toks = {m[0]: m[4] for m in models}
        jobs = []  # (name, label, arch, dtype, n_ctx, gguf): every file llama.cpp evaluates
        ours = {}
        for label, arch, src, n_ctx, _, dtypes in models:
            ours[label] = speclab_probs(src, ids)
            for dtype in dtypes:
                for writer in ("speclab", "gguf_write.py"):
                    gguf = os.path.join(tmp, f"{label}.{dtype}.{'sl' if writer == 'speclab' else 'py'}.gguf")
                    name = f"{label} ({arch}) GGUF {dtype.upper()} by {writer}"
                    try:
                        if writer == "speclab":
                            speclab("model", "convert", src, gguf, "--to", "gguf",
                                    *(["--dtype", dtype] if dtype != "f16" else []))
                        else:
                            subprocess.run([sys.executable, GGUF_WRITE, src, gguf, "--dtype", dtype], check=True,
                                           capture_output=True)
                    except (RuntimeError, subprocess.CalledProcessError) as e:
                        failures.append(f"{name}: could not be written: {str(e)[-300:]}")
                        continue
                    jobs.append((name, label, arch, dtype, n_ctx, gguf))
            if label == "llama":  # the other RoPE hypothesis
                perm = os.path.join(tmp, "llama.hfperm.safetensors")
                write_permuted(src, perm, LLAMA_CFG["n_head"], LLAMA_CFG["n_kv_head"],
                               LLAMA_CFG["d_model"] // LLAMA_CFG["n_head"])
                perm_gguf = os.path.join(tmp, "llama.hfperm.gguf")
                subprocess.run([sys.executable, GGUF_WRITE, perm, perm_gguf, "--dtype", "f32"], check=True,
                               capture_output=True)
                jobs.append(("llama, q/k rows permuted to Hugging Face's order", label, "permuted", "f32", n_ctx,
                             perm_gguf))

        t_files = time.time()
        # Phase 2: llama.cpp on every file, one node process.
        # Tokenization: the F16 files of each tokenizer kind (target: byte-level BPE, llama-sp: SPM).
        tok_jobs = [i for i, j in enumerate(jobs) if j[1] in ("target", "llama-sp")]
        lines = peer("probs", *[j[5] for j in jobs], "--ids", ",".join(map(str, ids)), "--tokenize", cases,
                     "--tokenize-only", ",".join(map(str, tok_jobs)))
        if lines is None:
            return 0

        t_peer = time.time()
        # Phase 3: the comparisons.
        q8_seen = {}
        for (name, label, arch, dtype, n_ctx, gguf), theirs in zip(jobs, lines):
            print(f"{name}:")
            if arch == "permuted":
                q = np.array(theirs["probs"])
                worst = float(np.abs(q - ours[label]).max())
                n_am = int((q.argmax(1) != ours[label].argmax(1)).sum())
                print(f"  other RoPE hypothesis: max |p - q| = {worst:.2e}, argmax differs at {n_am}/{N_TOKENS} "
                      f"positions (must exceed {PERMUTED_MIN:.0e}: the comparison sees a layout error)")
                if worst <= PERMUTED_MIN:
                    failures.append(f"permuted q/k rows agree with speclab to {worst:.3e}: the llama fixture "
                                    f"cannot tell the RoPE layouts apart")
                continue
            ref = ours[label]
            try:
                ours_g = speclab_probs(gguf, ids)
                if dtype == "q8_0":
                    # Quantised weights: speclab's reference is its own reading of this file, and
                    # both writers' files (ggml's reference quantiser) must read identically.
                    ref = ours_g
                    first = q8_seen.setdefault(label, ours_g)
                    same = np.array_equal(ours_g, first)
                    print(f"  speclab reads it {'identically' if same else 'DIFFERENTLY'} to the first Q8_0 file")
                else:
                    same = np.array_equal(ours_g, ours[label])
                    print(f"  speclab reads it {'identically' if same else 'DIFFERENTLY'} to the native file")
                if not same:
                    failures.append(f"{name}: speclab's probabilities differ from the "
                                    f"{'first Q8_0 file' if dtype == 'q8_0' else 'native file'}'s")
            except RuntimeError as e:
                failures.append(f"{name}: speclab cannot read it: {str(e)[-300:]}")
                print(f"  speclab cannot read it")
                if dtype == "q8_0":
                    continue
            compare(name, arch, dtype, ref, theirs, failures)
            check_info(name, theirs["info"], arch, n_ctx, toks[label], failures)
            if "tokenized" in theirs["info"]:
                compare_tokens(name, gguf, cases, strs, theirs["info"]["tokenized"], toks[label], failures)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        failures.append(f"setup: {str(e)[-500:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"time: {time.time() - t_start:.1f} s (files and speclab {t_files - t_start:.1f} s, "
          f"llama.cpp {t_peer - t_files:.1f} s)")
    for f in failures:
        print("FAIL:", f)
    if "--doc" in sys.argv and not failures and ROWS:
        # The measured table of tests/peer/README.md comes from this file, not from a hand.
        out = os.path.join(ROOT, "tests", "peer", "llamacpp_compare.csv")
        with open(out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(ROWS[0]))
            w.writeheader()
            w.writerows(ROWS)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "analysis", "doc_table.py"),
                        os.path.join(ROOT, "tests", "peer", "README.md"), out, "llamacpp_compare.csv"], check=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
