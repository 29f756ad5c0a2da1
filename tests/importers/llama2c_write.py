#!/usr/bin/env python3
"""llama2c_write.py: an independent writer of llama2.c checkpoints and tokenizer.bin files, for
speclab's tests (tests/test_llama2c.c, tests/cli/llama2c_import.py). numpy only, no speclab code.

It follows karpathy/llama2.c as published:
  export.py   legacy_export (version 0), version1_export, version2_export (Q8_0, quantize_q80),
              with model.py's precompute_freqs_cis (theta 10000, float32) for the legacy tables;
  tokenizer.py  Tokenizer.export: uint32 max_token_length, then per token float32 score, uint32
              length, the bytes; U+2581 written as ' ', BOS as "\\n<s>\\n", EOS as "\\n</s>\\n".
A model comes either from a speclab native safetensors file (models/FORMAT.md: read here with
numpy from the published safetensors layout) or from random numbers.

Subcommands:
  export SRC.safetensors OUT.bin --version {0,1,2} [--group-size 64] [--dequant-out X.safetensors]
      --dequant-out writes the native model whose weights are quantize_q80 -> dequantised (float32),
      what a version 2 file holds.
  random OUT.bin --dim D --hidden F --layers L --heads H --kv-heads K --vocab V --seq-len S
         [--separate] [--seed N] [--version V] [--native-out X.safetensors] [--tokenizer-json T]
      a random llama2.c model, and the same model as a native file (tokenizer T embedded there).
  encode TOKENIZER.bin VOCAB_SIZE TEXT...
      run.c's encode (BOS, dummy prefix, characters or byte fallback, merges by score): the ids.
  tokenizer SPEC.json OUT.bin [--chr-bytes] [--expect EXPECT.json]
      SPEC: {"pieces": [SentencePiece pieces], "scores": [...], "bos": 1, "eos": 2}. Writes
      tokenizer.bin as tokenizer.py does; --chr-bytes as the earlier tokenizer.py that wrote byte
      piece <0xXX> as the character chr(XX). --expect writes the sp-bpe JSON a reader should give
      (sl_tok.h's form), derived from SPEC directly.
"""
import argparse
import json
import struct
import sys

import numpy as np

# ---------------------------------------------------------------- native safetensors (numpy)


def st_read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__', {})
    base = 8 + n
    out = {}
    for name, e in h.items():
        s, t = e['data_offsets']
        raw = b[base + s:base + t]
        if e['dtype'] == 'F32':
            a = np.frombuffer(raw, '<f4')
        elif e['dtype'] == 'F16':
            a = np.frombuffer(raw, '<f2').astype(np.float32)  # exact widening
        elif e['dtype'] == 'BF16':
            a = (np.frombuffer(raw, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f'{path}: tensor {name}: dtype {e["dtype"]} is not a weight type')
        out[name] = a.reshape(e['shape']).astype(np.float32)
    return meta, out


def st_write(path, meta, tensors):
    header, off, blobs = {'__metadata__': meta}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype='<f4')
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    hj = json.dumps(header).encode()
    hj += b' ' * ((8 + len(hj) + 63) // 64 * 64 - 8 - len(hj))
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(hj)))
        f.write(hj)
        for x in blobs:
            f.write(x)

# ---------------------------------------------------------------- the model, llama2.c's names


class Model:
    """The parameters of llama2.c's model.py Transformer (weights as nn.Linear: (out, in))."""

    def __init__(self, p, w):
        self.p = p  # dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len
        self.w = w  # tok_embeddings, norm, output, layers: list of dicts


def from_native(path):
    meta, t = st_read(path)
    if meta.get('arch') != 'llama':
        raise SystemExit(f'{path}: arch {meta.get("arch")} is not llama')
    c = json.loads(meta['config'])
    L = c['n_layer']
    p = dict(dim=c['d_model'], hidden_dim=c['d_ff'], n_layers=L, n_heads=c['n_head'],
             n_kv_heads=c.get('n_kv_head', c['n_head']), vocab_size=c['vocab_size'], max_seq_len=c['max_seq_len'])
    layers = []
    for i in range(L):
        g = lambda k: t[f'layers.{i}.{k}.weight']
        layers.append(dict(attention_norm=g('attn_norm'), wq=g('attn.q'), wk=g('attn.k'), wv=g('attn.v'),
                           wo=g('attn.o'), ffn_norm=g('mlp_norm'), w1=g('mlp.gate'), w2=g('mlp.down'),
                           w3=g('mlp.up')))
    emb = t['tok_emb.weight']
    out = t.get('lm_head.weight', emb)
    return Model(p, dict(tok_embeddings=emb, norm=t['final_norm.weight'], output=out, layers=layers)), meta


def to_native(m, path, tokenizer_json=None, transform=None):
    """Writes m as a speclab native file; transform(a) is applied to each quantised weight."""
    p, w = m.p, m.w
    f = transform or (lambda a: a)
    shared = np.array_equal(w['tok_embeddings'], w['output'])
    cfg = dict(vocab_size=p['vocab_size'], n_layer=p['n_layers'], n_head=p['n_heads'], n_kv_head=p['n_kv_heads'],
               d_model=p['dim'], d_ff=p['hidden_dim'], max_seq_len=p['max_seq_len'], norm_eps=1e-5,
               rope_theta=10000.0, tied_embeddings=bool(shared))
    t = {'tok_emb.weight': f(w['tok_embeddings'])}
    for i, l in enumerate(w['layers']):
        t[f'layers.{i}.attn_norm.weight'] = l['attention_norm']
        for k, n in (('wq', 'attn.q'), ('wk', 'attn.k'), ('wv', 'attn.v'), ('wo', 'attn.o')):
            t[f'layers.{i}.{n}.weight'] = f(l[k])
        t[f'layers.{i}.mlp_norm.weight'] = l['ffn_norm']
        for k, n in (('w1', 'mlp.gate'), ('w2', 'mlp.down'), ('w3', 'mlp.up')):
            t[f'layers.{i}.{n}.weight'] = f(l[k])
    t['final_norm.weight'] = w['norm']
    if not shared:
        t['lm_head.weight'] = f(w['output'])
    meta = {'format': 'speclab-model', 'format_version': '1', 'arch': 'llama', 'config': json.dumps(cfg)}
    if tokenizer_json is not None:
        meta['tokenizer'] = tokenizer_json
    st_write(path, meta, t)

# ---------------------------------------------------------------- export.py


def serialize_fp32(f, a):
    f.write(np.ascontiguousarray(a, dtype='<f4').reshape(-1).tobytes())


def serialize_int8(f, a):
    f.write(np.ascontiguousarray(a, dtype=np.int8).reshape(-1).tobytes())


def quantize_q80(w, group_size):
    """export.py's quantize_q80 in numpy: symmetric int8 per group, scale = max|w| / 127 (float32),
    int8 = round(w / scale) with round-half-even (torch.round); a group of zeros: scale 0, q 0."""
    assert w.size % group_size == 0
    w = w.astype(np.float32).reshape(-1, group_size)
    wmax = np.abs(w).max(axis=1)
    scale = (wmax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide='ignore', invalid='ignore'):
        quant = w / scale[:, None]
    quant = np.where(scale[:, None] > 0, quant, np.float32(0))
    int8val = np.round(quant).astype(np.int8)
    return int8val, scale


def dequantize(int8val, scale, shape):
    """runq.c's dequantize: value = q * scale in float32."""
    return (int8val.astype(np.float32) * scale[:, None]).reshape(shape)


def freqs(hs, end, theta=10000.0):
    """model.py precompute_freqs_cis, in float32 as torch computes it."""
    fr = np.float32(1.0) / (np.float32(theta) ** (np.arange(0, hs, 2)[: hs // 2].astype(np.float32) / np.float32(hs)))
    t = np.arange(end).astype(np.float32)
    a = np.outer(t, fr).astype(np.float32)
    return np.cos(a).astype(np.float32), np.sin(a).astype(np.float32)


def header7(p, vocab):
    return struct.pack('iiiiiii', p['dim'], p['hidden_dim'], p['n_layers'], p['n_heads'], p['n_kv_heads'], vocab,
                       p['max_seq_len'])


def legacy_export(m, path):
    p, w = m.p, m.w
    shared = np.array_equal(w['tok_embeddings'], w['output'])
    with open(path, 'wb') as f:
        f.write(header7(p, p['vocab_size'] if shared else -p['vocab_size']))
        serialize_fp32(f, w['tok_embeddings'])
        for k in ('attention_norm', 'wq', 'wk', 'wv', 'wo', 'ffn_norm', 'w1', 'w2', 'w3'):
            for l in w['layers']:
                serialize_fp32(f, l[k])
        serialize_fp32(f, w['norm'])
        cos, sin = freqs(p['dim'] // p['n_heads'], p['max_seq_len'])
        serialize_fp32(f, cos)
        serialize_fp32(f, sin)
        if not shared:
            serialize_fp32(f, w['output'])


def v12_header(f, p, version, shared, group_size=None):
    f.write(struct.pack('I', 0x616b3432))
    f.write(struct.pack('i', version))
    f.write(header7(p, p['vocab_size']))
    f.write(struct.pack('B', int(shared)))
    if group_size is not None:
        f.write(struct.pack('i', group_size))
    pad = 256 - f.tell()
    assert pad >= 0
    f.write(b'\0' * pad)


def version1_export(m, path):
    p, w = m.p, m.w
    shared = np.array_equal(w['tok_embeddings'], w['output'])
    L = w['layers']
    weights = [*[l['attention_norm'] for l in L], *[l['ffn_norm'] for l in L], w['norm'], w['tok_embeddings'],
               *[l['wq'] for l in L], *[l['wk'] for l in L], *[l['wv'] for l in L], *[l['wo'] for l in L],
               *[l['w1'] for l in L], *[l['w2'] for l in L], *[l['w3'] for l in L]]
    if not shared:
        weights.append(w['output'])
    with open(path, 'wb') as f:
        v12_header(f, p, 1, shared)
        for a in weights:
            serialize_fp32(f, a)


def v2_group_size(p, group_size=64):
    while p['dim'] % group_size != 0:
        group_size //= 2
    return group_size


def q8_weights(m):
    w, L = m.w, m.w['layers']
    weights = [w['tok_embeddings'], *[l['wq'] for l in L], *[l['wk'] for l in L], *[l['wv'] for l in L],
               *[l['wo'] for l in L], *[l['w1'] for l in L], *[l['w2'] for l in L], *[l['w3'] for l in L]]
    shared = np.array_equal(w['tok_embeddings'], w['output'])
    if not shared:
        weights.append(w['output'])
    return weights, shared


def version2_export(m, path, group_size=64):
    p, w, L = m.p, m.w, m.w['layers']
    group_size = v2_group_size(p, group_size)
    weights, shared = q8_weights(m)
    for a in weights:
        assert a.size % group_size == 0
    with open(path, 'wb') as f:
        v12_header(f, p, 2, shared, group_size)
        for l in L:
            serialize_fp32(f, l['attention_norm'])
        for l in L:
            serialize_fp32(f, l['ffn_norm'])
        serialize_fp32(f, w['norm'])
        for a in weights:  # int8 values, then that tensor's scales (today's export.py, runq.c)
            q, s = quantize_q80(a, group_size)
            serialize_int8(f, q)
            serialize_fp32(f, s)

# ---------------------------------------------------------------- tokenizer.py


def tokenizer_export(spec, path, chr_bytes=False):
    tokens = []
    for i, t in enumerate(spec['pieces']):
        if i == spec.get('bos', 1):
            t = '\n<s>\n'
        elif i == spec.get('eos', 2):
            t = '\n</s>\n'
        elif chr_bytes and len(t) == 6 and t.startswith('<0x') and t.endswith('>'):
            t = chr(int(t[3:5], 16))
        t = t.replace('\u2581', ' ')
        tokens.append(t.encode('utf-8'))
    with open(path, 'wb') as f:
        f.write(struct.pack('I', max(len(t) for t in tokens)))
        for b, s in zip(tokens, spec['scores']):
            f.write(struct.pack('fI', s, len(b)))
            f.write(b)


def expected_sp_bpe(spec):
    """The sp-bpe JSON (sl_tok.h) for SPEC's SentencePiece vocabulary: types 2 unknown, 3 control,
    6 byte, 1 normal; scores as float32 values."""
    pieces = list(spec['pieces'])
    bos, eos = spec.get('bos', 1), spec.get('eos', 2)
    types = []
    for i, t in enumerate(pieces):
        if i in (bos, eos):
            types.append(3)
        elif t == '<unk>':
            types.append(2)
        elif len(t) == 6 and t.startswith('<0x') and t.endswith('>') and all(c in '0123456789ABCDEF' for c in t[3:5]):
            types.append(6)  # SentencePiece's byte pieces: <0x%02X>
        else:
            types.append(1)
    pieces[bos], pieces[eos] = '<s>', '</s>'
    return {'type': 'sp-bpe', 'pieces': pieces, 'scores': [float(np.float32(s)) for s in spec['scores']],
            'types': types, 'bos': bos, 'eos': eos, 'unk': pieces.index('<unk>') if '<unk>' in pieces else -1,
            'add_bos': bos >= 0, 'add_eos': False, 'add_dummy_prefix': True, 'byte_fallback': types.count(6) >= 256}



def tokenizer_read(path, vocab_size):
    """tokenizer.bin as run.c's build_tokenizer reads it: vocab_size (bytes, score) pairs."""
    b = open(path, 'rb').read()
    off, vocab, scores = 4, [], []
    for _ in range(vocab_size):
        score, n = struct.unpack_from('<fi', b, off)
        vocab.append(b[off + 8:off + 8 + n])
        scores.append(score)
        off += 8 + n
    return vocab, scores


def run_c_encode(vocab, scores, text, bos=True):
    """run.c's encode on tokenizer.bin's pieces: BOS (id 1), a dummy-prefix " " when the text is not
    empty, one token per UTF-8 character (at most 4 bytes) or, when the character is no piece, its
    bytes as ids byte + 3; then repeatedly merge the adjacent pair whose concatenation is a piece of
    the highest score (strictly higher wins, so the leftmost of equals)."""
    lookup = {}
    for i, v in enumerate(vocab):
        lookup.setdefault(v, i)  # run.c's bsearch over a sorted copy: any one of equal pieces
    tokens = [1] if bos else []
    data = text.encode('utf-8')
    if data:
        tokens.append(lookup[b' '])
    buf = b''
    for k, c in enumerate(data):
        if c & 0xC0 != 0x80:
            buf = b''
        buf += bytes([c])
        if k + 1 < len(data) and data[k + 1] & 0xC0 == 0x80 and len(buf) < 4:
            continue
        if buf in lookup:
            tokens.append(lookup[buf])
        else:
            tokens.extend(x + 3 for x in buf)
        buf = b''
    while True:
        best, best_id, best_idx = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            j = lookup.get(vocab[tokens[i]] + vocab[tokens[i + 1]], -1)
            if j != -1 and scores[j] > best:
                best, best_id, best_idx = scores[j], j, i
        if best_idx == -1:
            break
        tokens[best_idx:best_idx + 2] = [best_id]
    return tokens

# ---------------------------------------------------------------- CLI


def random_model(a):
    rng = np.random.default_rng(a.seed)
    d, f, L, V = a.dim, a.hidden, a.layers, a.vocab
    kvd = a.kv_heads * (d // a.heads)
    n = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
    nrm = lambda: (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    layers = [dict(attention_norm=nrm(), wq=n(d, d), wk=n(kvd, d), wv=n(kvd, d), wo=n(d, d), ffn_norm=nrm(),
                   w1=n(f, d), w2=n(d, f), w3=n(f, d)) for _ in range(L)]
    emb = n(V, d)
    p = dict(dim=d, hidden_dim=f, n_layers=L, n_heads=a.heads, n_kv_heads=a.kv_heads, vocab_size=V,
             max_seq_len=a.seq_len)
    return Model(p, dict(tok_embeddings=emb, norm=nrm(), output=n(V, d) if a.separate else emb, layers=layers))


def write_version(m, out, version, group_size=64):
    if version == 0:
        legacy_export(m, out)
    elif version == 1:
        version1_export(m, out)
    elif version == 2:
        version2_export(m, out, group_size)
    else:
        raise SystemExit(f'unknown version {version}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    e = sub.add_parser('export')
    e.add_argument('src')
    e.add_argument('out')
    e.add_argument('--version', type=int, default=0)
    e.add_argument('--group-size', type=int, default=64)
    e.add_argument('--dequant-out')
    r = sub.add_parser('random')
    r.add_argument('out')
    for k in ('dim', 'hidden', 'layers', 'heads', 'kv_heads', 'vocab', 'seq_len'):
        r.add_argument('--' + k.replace('_', '-'), type=int, required=True)
    r.add_argument('--separate', action='store_true')
    r.add_argument('--seed', type=int, default=0)
    r.add_argument('--version', type=int, default=0)
    r.add_argument('--native-out')
    r.add_argument('--tokenizer-json')
    t = sub.add_parser('tokenizer')
    t.add_argument('spec')
    t.add_argument('out')
    t.add_argument('--chr-bytes', action='store_true')
    t.add_argument('--expect')
    c = sub.add_parser('encode', help="run.c's encode: prints the ids of each TEXT on a line")
    c.add_argument('tokenizer_bin')
    c.add_argument('vocab_size', type=int)
    c.add_argument('text', nargs='+')
    a = ap.parse_args()
    if a.cmd == 'encode':
        vocab, scores = tokenizer_read(a.tokenizer_bin, a.vocab_size)
        for t in a.text:
            print(' '.join(map(str, run_c_encode(vocab, scores, t))))
        return 0
    if a.cmd == 'export':
        m, _ = from_native(a.src)
        write_version(m, a.out, a.version, a.group_size)
        if a.dequant_out:
            gs = v2_group_size(m.p, a.group_size)
            to_native(m, a.dequant_out, transform=lambda w: dequantize(*quantize_q80(w, gs), w.shape))
    elif a.cmd == 'random':
        m = random_model(a)
        write_version(m, a.out, a.version)
        if a.native_out:
            tj = open(a.tokenizer_json).read() if a.tokenizer_json else None
            to_native(m, a.native_out, tokenizer_json=tj)
    else:
        spec = json.load(open(a.spec))
        tokenizer_export(spec, a.out, a.chr_bytes)
        if a.expect:
            with open(a.expect, 'w') as f:
                json.dump(expected_sp_bpe(spec), f, ensure_ascii=False)
    return 0


if __name__ == '__main__':
    sys.exit(main())
