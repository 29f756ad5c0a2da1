#!/usr/bin/python3
"""GGUF files against llama.cpp itself: next-token probabilities, llama.cpp's view of the file,
and tokenization.

The peer is llama.cpp's prebuilt CPU library as shipped by the npm package node-llama-cpp 3.21.1,
driven by tests/peer/llamacpp_probs.mjs (options and measurements in tests/peer/README.md). It is
installed here into build/npm/llamacpp (git-ignored; its own prefix, because an `npm install
--no-save` into build/npm by another test prunes every package that install did not name).

Models (both stored F16), each written as GGUF with F16 weights (as stored), the llama also with
F32 and Q8_0 weights, by `speclab model convert IN OUT --to gguf [--dtype D]` and by the independent
numpy writer tests/importers/gguf_write.py [--dtype D]: 8 files.
  target  models/family/target.safetensors: gpt2, byte-level BPE vocabulary of 4096.
  llama   `speclab model init --arch llama` (grouped-query attention 4/2 heads, untied output, the
          same tokenizer), init std 0.25 so that attention is sharp and RoPE matters: with the
          default 0.02 the permuted layout below moves the probabilities by only 2.6e-6.

For a fixed 32-token sequence, llama.cpp's full next-token distribution at every position (all
4096 tokens) is compared with speclab's (`speclab model probs`: softmax in double of the float32
logits), from the native file. Checks and tolerances:
  - speclab on each F16/F32 GGUF == speclab on the native file, exactly (same weights; speclab
    computes in float32 whatever the stored type, and its F16 and F32 paths give identical logits).
    Q8_0: both writers' files read identically, and llama.cpp is compared with speclab's reading
    of the Q8_0 file (the quantised weights), not with the native file.
  - max |p_llama.cpp - p_speclab| over all positions and tokens, bound by (arch, GGUF type):
      llama F32: 1e-5. Measured 3.4e-7: float32 on both sides, only summation order, llama.cpp's
                 float32 exp/softmax differ. 29x margin.
      gpt2 F32:  1e-3 (not run by default: 220 MB more to write and read). Measured 1.9e-4 (2.9e-4
                 on random ids). llama.cpp's CPU GELU is a float16
                 lookup table (ggml-cpu/vec.h, GGML_GELU_FP16: f16(gelu(f16(x))) for |x| < 10): an
                 error of ~2^-11 relative on every MLP activation. A numpy float64 forward with that
                 rounding matches llama.cpp to 3.8e-5; without it, it matches speclab to 2.5e-7.
      F16 (both): 2e-3. ggml multiplies F16 weights by activations rounded to F16 (vec_dot_type F16)
                 except in the AMX path (CPU variant sapphirerapids, picked at run time where the CPU
                 has AMX), which keeps them float32. Measured with AMX: as F32 (bit-identical to
                 the F32 file); without (the same package with libggml-cpu-sapphirerapids.so removed,
                 avx512 variant): gpt2 6.9e-4, llama 5.4e-4. 2.9x margin over the worse.
      llama Q8_0: 3e-2. speclab dequantises the blocks and computes in float32; ggml quantises the
                 activations to Q8_0 too (vec_dot_type Q8_0, 8-bit per block of 32). Measured 9.7e-3
                 with and without AMX (3.1x margin); argmax differs at 4 of 32 positions, all near
                 ties (the llama's distributions are flat, top probability ~0.1), excused as below.
                 What it proves: llama.cpp reads the Q8_0 blocks as speclab and gguf_write.py write
                 them (measured: the blocks of each row rotated by one move probabilities by 0.25).
  - argmax equal at every position (a position whose top two speclab probabilities are within
    2 x bound would be excused and counted; none is in this sequence).
  - RoPE layout: the llama GGUF rows of attn_q/attn_k are the native rows (Meta's adjacent pairs
    (2j, 2j+1); llama.cpp's llama arch uses rope type NORM, which rotates adjacent pairs). The other
    hypothesis, rows permuted within each head to Hugging Face's half-split order, is written too
    (gguf_write.py on a permuted copy) and must disagree with speclab by more than 1e-2 (measured
    0.29, argmax differs at 29 of 32 positions): the comparison sees a layout error.
  - llama.cpp's view of each file: architecture, n_vocab 4096, n_ctx_train = max_seq_len,
    tokenizer model "gpt2", pre-tokenizer "gpt-2", BOS = EOS = 4095, no BOS added.
  - tokenization: llama.cpp's tokenizer (gpt2 model, "gpt-2" pre-tokenizer) vs `speclab tokenize
    encode --tokenizer FILE.gguf`, same file, on the 357 varied strings of
    tests/cli/test_tokenize_gpt2.py: identical ids (tokenization is discrete). Measured: 357/357.

Skips (exit 0 with a SKIP line) only when node/npm is missing, npm cannot install the package, or
llama.cpp's prebuilt library cannot load on this machine.
"""
import importlib.util
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


def load_cases():
    spec = importlib.util.spec_from_file_location("tok_gpt2", os.path.join("tests", "cli", "test_tokenize_gpt2.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.cases()


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
    if worst > bound:
        failures.append(f"{name}: max |p - q| = {worst:.3e} > {bound:.0e}")
    if (differ & ~excused).any():
        j = int(np.argmax(differ & ~excused))
        failures.append(f"{name}: argmax differs at position {j}: llama.cpp {am_theirs[j]}, speclab {am_ours[j]}")
    return worst


def check_info(name, info, arch, n_ctx, failures):
    want = {"architecture": arch, "n_vocab": 4096, "n_ctx_train": n_ctx, "tokenizer_model": "gpt2",
            "tokenizer_pre": "gpt-2", "bos": 4095, "eos": 4095, "add_bos": False}
    bad = {k: (info.get(k), v) for k, v in want.items() if info.get(k) != v}
    print(f"  llama.cpp sees arch {info.get('architecture')}, n_vocab {info.get('n_vocab')}, "
          f"n_ctx_train {info.get('n_ctx_train')}, tokenizer {info.get('tokenizer_model')}/{info.get('tokenizer_pre')}, "
          f"bos {info.get('bos')} eos {info.get('eos')}, add_bos {info.get('add_bos')}: "
          + ("as written" if not bad else f"MISMATCH {bad}"))
    if bad:
        failures.append(f"{name}: llama.cpp's view differs (got, want): {bad}")


def compare_tokens(name, gguf, cases, strs, ref, failures):
    r = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", gguf, "--jsonl", "--in", cases],
                       capture_output=True, text=True, env=ENV1)
    if r.returncode != 0:
        failures.append(f"{name}: speclab tokenize encode --tokenizer exited {r.returncode}: "
                        f"{r.stderr.strip()[-300:]}")
        print(f"  tokenization: speclab cannot tokenize with the GGUF's tokenizer")
        return
    ours = r.stdout.split("\n")[: len(strs)]
    bad = 0
    for s, a, b in zip(strs, ref, ours):
        if " ".join(map(str, a)) != b:
            bad += 1
            if bad <= 5:
                print(f"  MISMATCH on {s!r}:\n    llama.cpp: {' '.join(map(str, a))}\n    speclab:   {b}")
    if len(ours) != len(strs) or len(ref) != len(strs):
        bad = max(bad, 1)
    print(f"  tokenization (llama.cpp gpt2 / gpt-2 pre-tokenizer vs speclab, same GGUF): "
          f"{len(strs) - bad}/{len(strs)} strings identical")
    if bad:
        failures.append(f"{name}: tokenization: {bad}/{len(strs)} strings differ")


def main():
    t_start = time.time()
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
        models = [("target", "gpt2", TARGET, 256), ("llama", "llama", llama, LLAMA_CFG["max_seq_len"])]
        jobs = []  # (name, label, arch, dtype, n_ctx, gguf): every file llama.cpp evaluates
        ours = {}
        for label, arch, src, n_ctx in models:
            ours[label] = speclab_probs(src, ids)
            # Both natives are F16: "f16" keeps the weights' type. The target's F32 files would add
            # 220 MB of writing and reading for a check the small llama makes sharper.
            for dtype in (("f16",) if label == "target" else ("f16", "f32", "q8_0")):
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
            if arch == "llama":  # the other RoPE hypothesis
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
        lines = peer("probs", *[j[5] for j in jobs], "--ids", ",".join(map(str, ids)), "--tokenize", cases)
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
            check_info(name, theirs["info"], arch, n_ctx, failures)
            compare_tokens(name, gguf, cases, strs, theirs["info"]["tokenized"], failures)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"time: {time.time() - t_start:.1f} s (files and speclab {t_files - t_start:.1f} s, "
          f"llama.cpp {t_peer - t_files:.1f} s)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
