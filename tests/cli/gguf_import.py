#!/usr/bin/python3
"""GGUF import and export against an independent Python GGUF writer/reader.

The reference is tests/importers/gguf_write.py: a GGUF writer, reader and numpy (de)quantisers
written from the published GGUF specification and ggml's block layouts, not from speclab's C code.

(a) speclab's writer (`model convert IN OUT.gguf --to gguf`, v3 and v2) then speclab's reader
    (`model convert OUT.gguf back.safetensors --to speclab`): every native tensor equal to the
    source (same values; matrices also the same dtype and bytes), and `model probs` (softmax of the
    float32 logits, printed with 17 digits) string-identical to the source's. Tolerance: none.
(b) files written by gguf_write.py for both architectures, every dtype (F32 F16 BF16 Q8_0 Q4_0
    Q4_K Q6_K) and both versions: speclab's native tensors equal the numpy dequantisation exactly
    (both compute the same float32 products, no FMA) and its `model probs` are string-identical to
    the numpy-dequantised native model's (gguf_write.py --to-native); F32/F16/BF16-kept files give
    probs string-identical to the source model. Quantised ones: the largest change of any next-token
    probability against the source model must stay under a sanity bound per type (Q8_0 0.1, Q4_0
    0.5, Q4_K 0.05, Q6_K 0.02; observed on these models: about 0.04, 0.25, 0.008, 0.002, printed at
    each run). The bounds are empirical, with margin, on tiny random models (Q8_0 and Q4_0 on the
    64-wide fixtures with init std 0.2, which amplify weight noise; Q4_K and Q6_K on 256-wide models
    with std 0.05): they catch a grossly wrong mapping; exactness is established against numpy.
(c) gguf_write.py --check reads the GGUF that speclab wrote and checks every header field, key and
    tensor (bytes, Q8_0 blocks included) against what the independent writer produces.
    Tokenizers: byte-bpe (the family target's) and sp-bpe (a synthetic one) survive both ways.
(d) damaged files: truncated at every 1/16, wrong magic/version, huge counts, strings past the
    end, bad offsets, unknown type, 5 dims, ne overflow, duplicate names, missing key, wrong shape:
    each `model info` exits 2 with exactly one line on stderr, never a crash.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "importers"))
import numpy as np  # noqa: E402

import gguf_write as G  # noqa: E402

SPECLAB = os.environ.get("SPECLAB", "build/speclab")
ENV = dict(os.environ, OMP_NUM_THREADS="1")
FAILS = []
T0 = time.time()


def run(*args, ok=True):
    r = subprocess.run([SPECLAB, *args], capture_output=True, text=True, env=ENV)
    if ok and r.returncode != 0:
        raise SystemExit("FAIL: %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def probs(path, ids="1,2,3,7,100,250"):
    return run("model", "probs", path, "--prompt-ids", ids).stdout


def native_values(path):
    meta, ts = G.read_safetensors(path)
    return meta, {n: (dt, shape, raw, G.native_f32(dt, raw).reshape(shape)) for n, (dt, shape, raw) in ts.items()}


def compare_tensors(got_path, ref_path, what, same_bytes_2d=False):
    _, got = native_values(got_path)
    _, ref = native_values(ref_path)
    check(sorted(got) == sorted(ref), "%s: tensor names differ: %s" % (what, sorted(set(got) ^ set(ref))))
    for n in ref:
        if n not in got:
            continue
        g, r = got[n], ref[n]
        if list(g[1]) != list(r[1]):
            check(False, "%s: %s shape %s vs %s" % (what, n, g[1], r[1]))
            continue
        check(np.array_equal(g[3].view(np.uint32), r[3].view(np.uint32)), "%s: %s values differ" % (what, n))
        if same_bytes_2d and len(r[1]) == 2:
            check(g[0] == r[0] and g[2] == r[2], "%s: %s dtype/bytes differ (%s vs %s)" % (what, n, g[0], r[0]))


def max_prob_diff(a, b):
    pa, pb = np.array(json.loads(a)["probs"]), np.array(json.loads(b)["probs"])
    return float(np.abs(pa - pb).max())


def write_native(path, meta, tensors):
    """A native safetensors file with the given metadata and raw tensors (dtype, shape, bytes)."""
    header, pos, blobs = {"__metadata__": meta}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * ((-(8 + len(h))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def sp_tokenizer(n_extra):
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    extra = ["\u2581", "\u2581t", "he", "\u2581the", "ll", "o", "\u2581hello", "a", "b", "\u00e9", "\u2581\u00e9t",
             "\u4e2d", "\u2581\u4e2d"]
    pieces += extra[:n_extra]
    n = len(pieces)
    return {"type": "sp-bpe", "pieces": pieces, "scores": [0.0] * 259 + [-1.5 - 0.25 * i for i in range(n - 259)],
            "types": [2, 3, 3] + [6] * 256 + [1] * (n - 259), "bos": 1, "eos": 2, "unk": 0, "add_bos": True,
            "add_eos": False, "add_dummy_prefix": True, "byte_fallback": True}


def main():
    tmp = tempfile.mkdtemp(prefix="gguf_test.")
    P = lambda name: os.path.join(tmp, name)
    # Models: the four fixtures, two 256-wide ones (so Q4_K / Q6_K apply: rows of 256), the family
    # target (byte-bpe tokenizer, f16, 27M parameters) and a llama with a synthetic sp-bpe tokenizer.
    models = {m: "tests/ref/%s.safetensors" % m for m in ("gpt2_f32", "gpt2_f16", "llama_f32", "llama_f16")}
    cfgw = '{"vocab_size":272,"n_layer":1,"n_head":4,"n_kv_head":%d,"d_model":256,"d_ff":512,"max_seq_len":16}'
    run("model", "init", "--arch", "gpt2", "--config", cfgw % 4, "--out", P("gpt2_w.safetensors"), "--init-std", "0.05",
        "--seed", "3")
    run("model", "init", "--arch", "llama", "--config", cfgw % 2, "--out", P("llama_w.safetensors"), "--init-std",
        "0.05", "--seed", "4")
    run("model", "init", "--arch", "llama", "--config", cfgw.replace("256", "64").replace("512", "96") % 2, "--out",
        P("llama_bf16.safetensors"), "--dtype", "bf16", "--seed", "5")
    meta, ts = G.read_safetensors(P("llama_w.safetensors"))
    meta["tokenizer"] = json.dumps(sp_tokenizer(13))
    write_native(P("llama_sp.safetensors"), meta, ts)
    models.update(gpt2_w=P("gpt2_w.safetensors"), llama_sp=P("llama_sp.safetensors"),
                  llama_bf16=P("llama_bf16.safetensors"))

    # (a) + (c): speclab's writer, read back by speclab and by the independent reader.
    for name, src in list(models.items()) + [("target", "models/family/target.safetensors")]:
        ref_probs = probs(src)
        for ver in ("3", "2"):
            if ver == "2" and name not in ("gpt2_f32", "llama_sp"):
                continue
            out = P("%s.c%s.gguf" % (name, ver))
            run("model", "convert", src, out, "--to", "gguf", "--version", ver)
            probs_c = G.check(out, src)
            check(not probs_c, "(c) %s v%s: independent reader: %s" % (name, ver, probs_c[:5]))
            check(G.Reader(out).version == int(ver), "(c) %s: version field" % name)
            back = P("%s.c%s.back.safetensors" % (name, ver))
            run("model", "convert", out, back, "--to", "speclab")
            compare_tensors(back, src, "(a) %s v%s" % (name, ver), same_bytes_2d=True)
            check(probs(out) == ref_probs, "(a) %s v%s: probs differ from the source" % (name, ver))
            m_src, m_back = G.read_safetensors(src)[0], G.read_safetensors(back)[0]
            check(json.loads(m_back["config"]) == json.loads(m_src["config"]),
                  "(a) %s: config %s vs %s" % (name, m_back["config"], m_src["config"]))
            if "tokenizer" in m_src:
                check(json.loads(m_back.get("tokenizer", "null")) == json.loads(m_src["tokenizer"]),
                      "(a) %s: tokenizer differs after the round trip" % name)
            check(m_back.get("source_format") == "gguf", "(a) %s: source_format" % name)
        # Other output dtypes of speclab's writer against the independent writer's bytes.
        if name in ("llama_f16", "gpt2_w"):
            for dt in ("f32", "f16", "bf16", "q8_0"):
                out = P("%s.c.%s.gguf" % (name, dt))
                run("model", "convert", src, out, "--to", "gguf", "--dtype", dt)
                probs_c = G.check(out, src, dt)
                check(not probs_c, "(c) %s --dtype %s: %s" % (name, dt, probs_c[:5]))
    print("gguf: (a)+(c) speclab's writer: done (%.1f s)" % (time.time() - T0))

    # (b): the independent writer's files, read by speclab.
    bound = {"q8_0": 0.1, "q4_0": 0.5, "q4_k": 0.05, "q6_k": 0.02}
    worst = {}
    for name in ("gpt2_f32", "llama_f16", "gpt2_w", "llama_sp"):
        src = models[name]
        ref_probs = probs(src)
        # 64-wide fixtures: rows are not whole 256-blocks (Q4_K/Q6_K would fall back to Q8_0 there);
        # the 256-wide models carry the k-quants.
        wide = name in ("gpt2_w", "llama_sp")
        for dt in ("keep", "q4_0", "q4_k", "q6_k") if wide else ("keep", "f32", "f16", "bf16", "q8_0", "q4_0"):
            for ver in (3, 2):
                if ver == 2 and (dt != "q4_k" or name != "llama_sp"):
                    continue
                f = P("%s.py.%s.v%d.gguf" % (name, dt, ver))
                G.write_model(src, f, dt, ver)
                ref = P("%s.py.%s.v%d.ref.safetensors" % (name, dt, ver))
                G.to_native(f, ref)
                got = P("%s.py.%s.v%d.got.safetensors" % (name, dt, ver))
                run("model", "convert", f, got, "--to", "speclab")
                compare_tensors(got, ref, "(b) %s %s v%d" % (name, dt, ver))
                pr = probs(f)
                check(pr == probs(ref), "(b) %s %s v%d: probs differ from the numpy-dequantised model" % (name, dt, ver))
                src_dtype = "f16" if name.endswith("f16") else "f32"
                if dt in ("keep", "f32") or dt == src_dtype:
                    check(pr == ref_probs, "(b) %s %s: probs differ from the source model" % (name, dt))
                elif dt in bound:
                    d = max_prob_diff(pr, ref_probs)
                    worst[dt] = max(worst.get(dt, 0.0), d)
                    check(d < bound[dt], "(b) %s %s: max |dp| %.4f >= %.2f" % (name, dt, d, bound[dt]))
        info = run("model", "info", P("%s.py.q4_0.v3.gguf" % name)).stdout
        check("format: gguf" in info, "(b) %s: model info does not say gguf" % name)
        check('"Q4_0"' in info, "(b) %s: model info does not report the source's Q4_0 tensors" % name)
    # Tokenizers written by the independent writer, read by speclab.
    for name, src in (("llama_sp", models["llama_sp"]), ("target", "models/family/target.safetensors")):
        f = P("%s.tok.gguf" % name)
        G.write_model(src, f, "keep" if name != "target" else "q8_0")
        back = P("%s.tok.back.safetensors" % name)
        run("model", "convert", f, back, "--to", "speclab")
        check(json.loads(G.read_safetensors(back)[0].get("tokenizer", "null")) ==
              json.loads(G.read_safetensors(src)[0]["tokenizer"]), "(b) %s: tokenizer differs" % name)
    print("gguf: (b) independent writer: done; largest probability change against the f32/f16 source: %s "
          "(bounds %s) (%.1f s)" % (", ".join("%s %.4f" % kv for kv in sorted(worst.items())), bound, time.time() - T0))

    # (d) damaged files.
    base_f = P("llama_sp.py.q4_k.v3.gguf")
    base = open(base_f, "rb").read()
    bad = {}
    hdr = G.Reader(base_f).header_end
    for k in range(16):
        bad["trunc%02d" % k] = base[:len(base) * k // 16]
        bad["trunc_header%02d" % k] = base[:hdr * k // 16]
    bad["trunc_last"] = base[:-1]
    r = G.Reader(base_f)
    bad["magic"] = b"GGUX" + base[4:]
    bad["version1"] = base[:4] + struct.pack("<I", 1) + base[8:]
    bad["version4"] = base[:4] + struct.pack("<I", 4) + base[8:]
    bad["big_endian"] = base[:4] + struct.pack(">I", 3) + base[8:]
    bad["n_tensors_2^60"] = base[:8] + struct.pack("<Q", 1 << 60) + base[16:]
    bad["n_kv_2^60"] = base[:16] + struct.pack("<Q", 1 << 60) + base[24:]
    # the first key's name length past the end
    bad["strlen_past_end"] = base[:24] + struct.pack("<Q", len(base)) + base[32:]
    meta_src, ts_src = G.read_safetensors(models["llama_f32"])
    kvs = G.gguf_kvs(meta_src)
    good = G.build_model_tensors(meta_src, ts_src, "keep")

    def variant(fn, kv_fn=None, **kw):
        t = [dict(x) for x in good]
        fn(t)
        k = list(kvs)
        if kv_fn:
            k = kv_fn(k)
        return G.build_gguf(k, t, **kw)

    def set0(key, value):
        def f(t):
            t[0][key] = value
        return f

    bad["offset_outside"] = variant(set0("offset", 1 << 40))
    bad["offset_misaligned"] = variant(set0("offset", 4))
    bad["overlap"] = variant(lambda t: t[1].__setitem__("offset", 32))
    bad["unknown_type"] = variant(set0("type", 77))
    bad["type_q5_k"] = variant(set0("type", 13))
    bad["n_dims_5"] = variant(set0("ne", [64, 256, 1, 1, 1]))
    bad["ne_overflow"] = variant(set0("ne", [1 << 33, 1 << 33]))
    bad["ne_not_blocks"] = variant(lambda t: (t[0].__setitem__("type", G.GGML_Q8_0), t[0].__setitem__("ne", [48, 256])))
    bad["duplicate_tensor"] = variant(lambda t: t[2].__setitem__("name", t[1]["name"]))
    bad["duplicate_key"] = variant(lambda t: None, lambda k: k + [k[3]])
    bad["missing_key"] = variant(lambda t: None, lambda k: [x for x in k if x[0] != "llama.block_count"])
    bad["missing_tensor"] = variant(lambda t: t.pop(3))
    bad["extra_tensor"] = variant(lambda t: t.append(dict(t[1], name="rope_freqs.weight", offset=None)))
    bad["wrong_shape"] = variant(lambda t: [x.__setitem__("ne", list(reversed(x["ne"]))) for x in t
                                           if x["name"] == "blk.0.attn_k.weight"])
    bad["wrong_key_type"] = variant(lambda t: None, lambda k: [(x[0], G.T_STR, "x") if x[0] == "llama.block_count"
                                                                else x for x in k])
    bad["alignment_3"] = variant(lambda t: None, lambda k: [(x[0], x[1], 3) if x[0] == "general.alignment" else x
                                                            for x in k])
    bad["rope_dims"] = variant(lambda t: None, lambda k: [(x[0], x[1], 8) if x[0] == "llama.rope.dimension_count"
                                                          else x for x in k])
    bad["arch_bert"] = variant(lambda t: None, lambda k: [(x[0], x[1], "bert") if x[0] == "general.architecture"
                                                          else x for x in k])
    deep = (G.T_U8, [1])
    for _ in range(9):  # 10 nested arrays: deeper than the reader's limit of 8
        deep = (G.T_ARR, [deep])
    bad["nested_array_deep"] = variant(lambda t: None, lambda k: k + [("x.deep", G.T_ARR, deep)])
    bad["array_count_huge"] = variant(lambda t: None, lambda k: k + [("x.arr", G.T_ARR, (G.T_U32, [1, 2]))])
    i = bad["array_count_huge"].find(b"x.arr")
    b2 = bytearray(bad["array_count_huge"])
    b2[i + 5 + 4 + 4:i + 5 + 4 + 12] = struct.pack("<Q", 1 << 61)
    bad["array_count_huge"] = bytes(b2)
    bad["bad_utf8_token"] = variant(lambda t: None, lambda k: k + [
        ("tokenizer.ggml.model", G.T_STR, "llama"), ("tokenizer.ggml.tokens", G.T_ARR, (G.T_STR, [b"\xff\xfe"] * 256))])
    bad["tokens_count"] = variant(lambda t: None, lambda k: k + [
        ("tokenizer.ggml.model", G.T_STR, "gpt2"), ("tokenizer.ggml.tokens", G.T_ARR, (G.T_STR, ["a"] * 255)),
        ("tokenizer.ggml.merges", G.T_ARR, (G.T_STR, []))])
    n_bad = 0
    for name, blob in sorted(bad.items()):
        f = P("bad_%s.gguf" % name)
        open(f, "wb").write(blob)
        r = run("model", "info", f, ok=False)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and "Sanitizer" not in r.stderr,
              "(d) %s: exit %d, stderr %r" % (name, r.returncode, r.stderr[-300:]))
        if os.environ.get("GGUF_VERBOSE"):
            print("  %s: %s" % (name, r.stderr.strip()))
        n_bad += 1
    print("gguf: (d) %d damaged files, each exit 2 with one line (%.1f s)" % (n_bad, time.time() - T0))
    if FAILS:
        print("gguf: %d FAILURES" % len(FAILS))
        return 1
    print("gguf: all checks passed in %.1f s (temp dir %s)" % (time.time() - T0, tmp))
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
