#!/usr/bin/python3
"""Writes a Hugging Face GPT-2 folder, independently of speclab's C code.

Follows the published conventions, not our importer:
  * safetensors (https://github.com/huggingface/safetensors, "Format"): u64 little-endian header
    length N, N bytes of JSON {"__metadata__": {"format": "pt"}, NAME: {"dtype", "shape",
    "data_offsets": [begin, end]}}, padded with spaces to a multiple of 8, then the data buffer.
  * transformers' GPT-2 (modeling_gpt2.py): GPT2LMHeadModel's tensors are "transformer.wte.weight"
    (vocab, d), "transformer.wpe.weight" (n_positions, d), "transformer.h.N.ln_1.{weight,bias}",
    "transformer.h.N.attn.c_attn.{weight,bias}" (Conv1D: weight (in, out) = (d, 3d), out axis q|k|v),
    "transformer.h.N.attn.c_proj.*" (d, d), "transformer.h.N.ln_2.*", "transformer.h.N.mlp.c_fc.*"
    (d, d_ff), "transformer.h.N.mlp.c_proj.*" (d_ff, d), "transformer.ln_f.*"; GPT2Model's are the
    same without "transformer."; older versions also saved the causal-mask buffers
    h.N.attn.bias (1, 1, n_positions, n_positions) and h.N.attn.masked_bias (a scalar, -1e4).
    config.json holds GPT2Config's keys (model_type "gpt2", n_embd, n_layer, n_head, n_positions,
    n_ctx, n_inner null, activation_function "gelu_new", layer_norm_epsilon, ...).
  * GPT-2's tokenizer files: vocab.json (token -> id, the byte-to-unicode strings) and merges.txt
    ("#version: 0.2" then one "a b" merge per line), or tokenizers' tokenizer.json (model BPE with
    a vocab map and merges, added_tokens, ByteLevel pre-tokenizer / post-processor / decoder).

The source is a native speclab gpt2 model (models/FORMAT.md: nn.Linear weights (out, in), separate
q, k, v), read here with its own small safetensors reader; or random weights (--random) for a
model of GPT-2's real vocabulary.

Usage: hf_gpt2_write.py NATIVE.safetensors OUT_DIR [--no-prefix] [--no-mask] [--lm-head]
                        [--tokenizer vocab|json|both|none] [--merges-pairs] [--base-vocab N]
       hf_gpt2_write.py --random OUT_DIR --vocab-json FILE --merges FILE [--d 16 --layers 1 ...]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# Element sizes of the safetensors dtypes we move around. Transposing copies elements, so BF16 and
# F16 travel as raw 16-bit words: the values are never converted.
RAW = {"F32": np.uint32, "F16": np.uint16, "BF16": np.uint16, "I32": np.int32, "U8": np.uint8, "BOOL": np.uint8,
       "F64": np.uint64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(blob[base + b:base + end], dtype=RAW[e["dtype"]]).reshape(e["shape"])
        tensors[name] = (e["dtype"], arr)
    return meta, tensors


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype, raw array). Header padded to 8 bytes with spaces."""
    header = {"__metadata__": metadata or {"format": "pt"}}
    off = 0
    for name, dt, arr in tensors:
        nb = arr.size * arr.dtype.itemsize
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + nb]}
        off += nb
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for _, _, arr in tensors:
            f.write(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes())


def hf_config(vocab, n_positions, d, n_layer, n_head, d_ff, eps, tied, eos_id):
    return {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1,
        "bos_token_id": eos_id,
        "embd_pdrop": 0.1,
        "eos_token_id": eos_id,
        "initializer_range": 0.02,
        "layer_norm_epsilon": eps,
        "model_type": "gpt2",
        "n_ctx": n_positions,
        "n_embd": d,
        "n_head": n_head,
        "n_inner": None if d_ff == 4 * d else d_ff,
        "n_layer": n_layer,
        "n_positions": n_positions,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.1,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
        "transformers_version": "4.46.0",
        "use_cache": True,
        "vocab_size": vocab,
    }


def hf_tensors(get, n_layer, n_positions, prefix, mask, lm_head):
    """get(native_name) -> (dtype, raw array (out, in) or (n,)). Returns the HF tensor list."""
    p = "transformer." if prefix else ""
    out = [(p + "wte.weight",) + get("tok_emb.weight"), (p + "wpe.weight",) + get("pos_emb.weight")]
    for i in range(n_layer):
        L = f"layers.{i}."
        h = f"{p}h.{i}."
        dq, q = get(L + "attn.q.weight")
        _, k = get(L + "attn.k.weight")
        _, v = get(L + "attn.v.weight")
        # Conv1D stores (in, out): c_attn.weight[:, 0:d] = q^T, [:, d:2d] = k^T, [:, 2d:3d] = v^T.
        c_attn = np.concatenate([q.T, k.T, v.T], axis=1)
        dbq, bq = get(L + "attn.q.bias")
        bias = np.concatenate([bq, get(L + "attn.k.bias")[1], get(L + "attn.v.bias")[1]])
        out += [(h + "ln_1.weight",) + get(L + "attn_norm.weight"), (h + "ln_1.bias",) + get(L + "attn_norm.bias")]
        if mask:
            tril = np.tril(np.ones((n_positions, n_positions), dtype=np.float32)).reshape(1, 1, n_positions, n_positions)
            out.append((h + "attn.bias", "F32", tril.view(np.uint32)))
        out += [(h + "attn.c_attn.weight", dq, c_attn), (h + "attn.c_attn.bias", dbq, bias)]
        do, o = get(L + "attn.o.weight")
        out += [(h + "attn.c_proj.weight", do, o.T), (h + "attn.c_proj.bias",) + get(L + "attn.o.bias")]
        if mask:
            out.append((h + "attn.masked_bias", "F32", np.array(-1e4, dtype=np.float32).view(np.uint32)))
        out += [(h + "ln_2.weight",) + get(L + "mlp_norm.weight"), (h + "ln_2.bias",) + get(L + "mlp_norm.bias")]
        du, up = get(L + "mlp.up.weight")
        dd, down = get(L + "mlp.down.weight")
        out += [(h + "mlp.c_fc.weight", du, up.T), (h + "mlp.c_fc.bias",) + get(L + "mlp.up.bias"),
                (h + "mlp.c_proj.weight", dd, down.T), (h + "mlp.c_proj.bias",) + get(L + "mlp.down.bias")]
    out += [(p + "ln_f.weight",) + get("final_norm.weight"), (p + "ln_f.bias",) + get("final_norm.bias")]
    if lm_head:
        out.append(("lm_head.weight",) + lm_head)
    return out


def write_tokenizer(out_dir, tok, kind, merges_pairs=False, base_vocab=None):
    """tok: the native byte-bpe JSON (vocab list, merges "a b", special text -> id). base_vocab: the
    ids from it on are tokens added after training (add_tokens / add_special_tokens): as
    transformers saves them, they go to added_tokens.json beside vocab.json, and only to
    tokenizer.json's added_tokens, not its model.vocab."""
    vocab, merges, special = tok["vocab"], tok["merges"], tok.get("special", {})
    nb = len(vocab) if base_vocab is None else base_vocab
    if kind in ("vocab", "both"):
        with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump({s: i for i, s in enumerate(vocab[:nb])}, f, ensure_ascii=False)
        with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for m in merges:
                f.write(m + "\n")
        if nb < len(vocab):
            with open(os.path.join(out_dir, "added_tokens.json"), "w", encoding="utf-8") as f:
                json.dump({vocab[i]: i for i in range(nb, len(vocab))}, f, ensure_ascii=False)
    if kind in ("json", "both"):
        added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                  "special": True} for s, i in sorted(special.items(), key=lambda kv: kv[1])]
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        doc = {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {s: i for i, s in enumerate(vocab[:nb])},
                      "merges": [m.split(" ") for m in merges] if merges_pairs else list(merges)},
        }
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)


def from_native(args):
    meta, t = read_safetensors(args.native)
    cfg = json.loads(meta["config"])
    assert meta.get("arch") == "gpt2", "not a native gpt2 model"
    d, n_layer, n_pos = cfg["d_model"], cfg["n_layer"], cfg["max_seq_len"]
    tied = cfg.get("tied_embeddings", True)
    tok = json.loads(meta["tokenizer"]) if "tokenizer" in meta else None
    eos = tok["special"].get("<|endoftext|>") if tok else None
    lm_head = None
    if not tied:
        lm_head = t["lm_head.weight"]
    elif args.lm_head:
        lm_head = t["tok_emb.weight"]  # tied: a stored head equal to wte
    os.makedirs(args.out, exist_ok=True)
    tensors = hf_tensors(lambda n: t[n], n_layer, n_pos, not args.no_prefix, not args.no_mask, lm_head)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
    c = hf_config(cfg["vocab_size"], n_pos, d, n_layer, cfg["n_head"], cfg["d_ff"], cfg.get("norm_eps", 1e-5), tied,
                  eos)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if tok and args.tokenizer != "none":
        write_tokenizer(args.out, tok, args.tokenizer, args.merges_pairs, args.base_vocab)


def random_model(args):
    """GPT-2 of vocab len(vocab.json) with N(0, 0.02^2) weights, F32, and GPT-2's own tokenizer files."""
    with open(args.vocab_json, encoding="utf-8") as f:
        vocab = json.load(f)
    V = len(vocab)
    rng = np.random.default_rng(args.seed)
    d, L, H, P = args.d, args.layers, args.heads, args.ctx

    def w(*shape):
        return ("F32", rng.normal(0, 0.02, size=shape).astype(np.float32).view(np.uint32))

    native = {"tok_emb.weight": w(V, d), "pos_emb.weight": w(P, d), "final_norm.weight": w(d),
              "final_norm.bias": w(d)}
    for i in range(L):
        for n, s in [("attn_norm.weight", (d,)), ("attn_norm.bias", (d,)), ("attn.q.weight", (d, d)),
                     ("attn.k.weight", (d, d)), ("attn.v.weight", (d, d)), ("attn.o.weight", (d, d)),
                     ("attn.q.bias", (d,)), ("attn.k.bias", (d,)), ("attn.v.bias", (d,)), ("attn.o.bias", (d,)),
                     ("mlp_norm.weight", (d,)), ("mlp_norm.bias", (d,)), ("mlp.up.weight", (4 * d, d)),
                     ("mlp.down.weight", (d, 4 * d)), ("mlp.up.bias", (4 * d,)), ("mlp.down.bias", (d,))]:
            native[f"layers.{i}.{n}"] = w(*s)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"),
                      hf_tensors(lambda n: native[n], L, P, True, False, None))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf_config(V, P, d, L, H, 4 * d, 1e-5, True, vocab.get("<|endoftext|>")), f, indent=2)
    with open(args.vocab_json, "rb") as f, open(os.path.join(args.out, "vocab.json"), "wb") as g:
        g.write(f.read())
    with open(args.merges, "rb") as f, open(os.path.join(args.out, "merges.txt"), "wb") as g:
        g.write(f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("native", nargs="?")
    ap.add_argument("out")
    ap.add_argument("--no-prefix", action="store_true", help="GPT2Model names (no 'transformer.')")
    ap.add_argument("--no-mask", action="store_true", help="leave out the attention-mask buffers")
    ap.add_argument("--lm-head", action="store_true", help="store lm_head.weight (= wte) although tied")
    ap.add_argument("--tokenizer", default="vocab", choices=["vocab", "json", "both", "none"])
    ap.add_argument("--merges-pairs", action="store_true", help="tokenizer.json merges as [a, b] pairs")
    ap.add_argument("--base-vocab", type=int, help="ids from this on were added after training")
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--vocab-json")
    ap.add_argument("--merges")
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.random:
        random_model(args)
    else:
        from_native(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
