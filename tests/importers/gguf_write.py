#!/usr/bin/python3
"""gguf_write.py: an independent GGUF v2/v3 writer and reader with numpy quantisers/dequantisers.

Written from the published GGUF specification (ggml's docs/gguf.md: header "GGUF", u32 version,
u64 tensor count, u64 key/value count, key/values, tensor infos, padding to general.alignment,
tensor data; every offset relative to the data section and a multiple of the alignment) and from
ggml's block layouts (ggml-common.h / ggml-quants.c), not from speclab's C code. Only numpy.

Uses:
  gguf_write.py IN.safetensors OUT.gguf [--dtype keep|f32|f16|bf16|q8_0|q4_0|q4_k|q6_k]
                [--version 2|3] [--random-blocks SEED]
      writes a speclab native model (models/FORMAT.md) as a llama.cpp-style GGUF (arch gpt2 or
      llama, tokenizer from the native tokenizer JSON). 1-D tensors (norms, biases) are always F32
      (llama.cpp requires it). A weight whose row length does not fit the block size falls back:
      q4_k/q6_k -> q8_0 (rows a multiple of 32) -> f16. --random-blocks fills every quantised
      tensor with random valid blocks instead of the quantised weights (dequantiser tests).
  gguf_write.py --check OUT.gguf IN.safetensors [--dtype D]
      parses OUT.gguf with this file's reader and checks every header field, key and tensor against
      what this writer would write from IN (quantised tensors: the same block bytes).
  gguf_write.py --blocks OUTDIR [--seed S]
      OUTDIR/blocks.gguf holds one tensor per type (F32 F16 BF16 Q8_0 Q4_0 Q4_K Q6_K) of random
      valid blocks, OUTDIR/TYPE.f32 the numpy dequantisation (raw little-endian float32).
  gguf_write.py --to-native FILE.gguf OUT.safetensors
      reads a llama/gpt2 GGUF with this file's reader and writes the native model (FORMAT.md) with
      every tensor dequantised to F32 by numpy (gpt2's attn_qkv split into q, k, v): the reference
      a GGUF importer's tensors and logits must equal exactly.
  gguf_write.py --dump FILE.gguf
      prints the header, the keys (arrays shortened) and the tensor infos.

Dequantisation follows ggml's dequantize_row_*: every product is a float32 operation rounded to
float32 (d * q, (d * sc) * q, d1 * q - m1), so a C implementation doing the same float32 operations
(no fused multiply-add) gives bit-identical results.

Quantisers: Q8_0 and Q4_0 are ggml's reference quantisers (quantize_row_q8_0_ref, _q4_0_ref:
d = amax / 127, q = roundf(x * (1/d)); d = max / -8, q = min(15, (int)(x/d + 8.5))). Q4_K and Q6_K
use a simpler scale choice than ggml's iterative search (make_qkx2_quants / make_qx_quants) but
write exactly ggml's block layout; their error is larger than llama.cpp's but bounded by half a step.
"""
import json
import struct
import sys

import numpy as np

# ---- the format's constants (gguf.md) ----
GGUF_MAGIC = b"GGUF"
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
              T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}

# ggml_type numbers and (block elements, block bytes)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_Q4_K, GGML_Q6_K, GGML_BF16 = 0, 1, 2, 8, 12, 14, 30
GGML_TYPES = {GGML_F32: ("F32", 1, 4), GGML_F16: ("F16", 1, 2), GGML_Q4_0: ("Q4_0", 32, 18),
              GGML_Q8_0: ("Q8_0", 32, 34), GGML_Q4_K: ("Q4_K", 256, 144), GGML_Q6_K: ("Q6_K", 256, 210),
              GGML_BF16: ("BF16", 1, 2)}
DTYPE_TO_GGML = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16, "q8_0": GGML_Q8_0, "q4_0": GGML_Q4_0,
                 "q4_k": GGML_Q4_K, "q6_k": GGML_Q6_K}
F32 = np.float32


# ---- bfloat16 / float16 helpers ----
def bf16_to_f32(u16):
    return (np.asarray(u16, dtype=np.uint32) << 16).view(F32)


def f32_to_bf16(x):
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7f800000) == 0x7f800000
    nan &= (u & 0x007fffff) != 0
    r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def f16_bits_to_f32(u16):
    return np.asarray(u16, dtype=np.uint16).view(np.float16).astype(F32)


def f32_to_f16_bits(x):
    return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def roundf(x):
    """C's roundf (half away from zero) on float32 values, computed exactly in float64."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# ---- dequantisers (ggml's dequantize_row_*), each returns float32 of n = blocks * block size ----
def deq_q8_0(raw):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2")[:, 0])
    q = b[:, 2:34].view(np.int8).astype(F32)
    return (d[:, None] * q).astype(F32).reshape(-1)


def deq_q4_0(raw):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2")[:, 0])
    qs = b[:, 2:18]
    lo = ((qs & 0x0F).astype(np.int32) - 8).astype(F32)  # elements 0..15
    hi = ((qs >> 4).astype(np.int32) - 8).astype(F32)    # elements 16..31
    return (np.concatenate([lo, hi], axis=1) * d[:, None]).astype(F32).reshape(-1)


def q4k_scale_min(scales):
    """ggml's get_scale_min_k4 for j = 0..7: 6-bit scales and mins packed in 12 bytes.
    scales: (nb, 12) uint8 -> (sc, m) each (nb, 8) int."""
    s = scales.astype(np.int32)
    sc = np.zeros((s.shape[0], 8), np.int32)
    m = np.zeros((s.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            m[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
            m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, m


def deq_q4_k(raw):
    # block_q4_K: f16 d, f16 dmin, u8 scales[12], u8 qs[128]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 144)
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2")[:, 0])
    dmin = f16_bits_to_f32(b[:, 2:4].copy().view("<u2")[:, 0])
    sc, m = q4k_scale_min(b[:, 4:16])
    qs = b[:, 16:144]
    out = np.zeros((b.shape[0], 256), F32)
    for j in range(4):  # 64 elements each: 32 low nibbles (sub-block 2j), 32 high nibbles (2j+1)
        q = qs[:, 32 * j:32 * j + 32]
        d1 = (d * sc[:, 2 * j].astype(F32)).astype(F32)
        m1 = (dmin * m[:, 2 * j].astype(F32)).astype(F32)
        d2 = (d * sc[:, 2 * j + 1].astype(F32)).astype(F32)
        m2 = (dmin * m[:, 2 * j + 1].astype(F32)).astype(F32)
        out[:, 64 * j:64 * j + 32] = (d1[:, None] * (q & 0xF).astype(F32)).astype(F32) - m1[:, None]
        out[:, 64 * j + 32:64 * j + 64] = (d2[:, None] * (q >> 4).astype(F32)).astype(F32) - m2[:, None]
    return out.reshape(-1)


def deq_q6_k(raw):
    # block_q6_K: u8 ql[128], u8 qh[64], i8 scales[16], f16 d
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 210)
    ql = b[:, 0:128].astype(np.int32)
    qh = b[:, 128:192].astype(np.int32)
    sc = b[:, 192:208].view(np.int8).astype(F32)
    d = f16_bits_to_f32(b[:, 208:210].copy().view("<u2")[:, 0])
    out = np.zeros((b.shape[0], 256), F32)
    for half in range(2):  # 128 elements per half: ql 64 bytes, qh 32 bytes, 8 scales
        L = ql[:, 64 * half:64 * half + 64]
        H = qh[:, 32 * half:32 * half + 32]
        S = sc[:, 8 * half:8 * half + 8]
        y = out[:, 128 * half:128 * half + 128]
        for l in range(32):
            i = l // 16
            q1 = ((L[:, l] & 0xF) | (((H[:, l] >> 0) & 3) << 4)) - 32
            q2 = ((L[:, l + 32] & 0xF) | (((H[:, l] >> 2) & 3) << 4)) - 32
            q3 = ((L[:, l] >> 4) | (((H[:, l] >> 4) & 3) << 4)) - 32
            q4 = ((L[:, l + 32] >> 4) | (((H[:, l] >> 6) & 3) << 4)) - 32
            for k, q in ((0, q1), (2, q2), (4, q3), (6, q4)):
                y[:, l + 16 * k] = ((d * S[:, i + k]).astype(F32) * q.astype(F32)).astype(F32)
    return out.reshape(-1)


def dequantize(gtype, raw, n):
    if gtype == GGML_F32:
        return np.frombuffer(raw, dtype="<f4", count=n).astype(F32)
    if gtype == GGML_F16:
        return f16_bits_to_f32(np.frombuffer(raw, dtype="<u2", count=n))
    if gtype == GGML_BF16:
        return bf16_to_f32(np.frombuffer(raw, dtype="<u2", count=n))
    f = {GGML_Q8_0: deq_q8_0, GGML_Q4_0: deq_q4_0, GGML_Q4_K: deq_q4_k, GGML_Q6_K: deq_q6_k}[gtype]
    return f(raw)[:n]


# ---- quantisers: float32 (n) with n a multiple of the block size -> block bytes ----
def quant_q8_0(x):
    x = np.asarray(x, F32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / F32(127)).astype(F32)
    idv = np.where(d != 0, (F32(1) / np.where(d != 0, d, F32(1))).astype(F32), F32(0)).astype(F32)
    q = roundf((x * idv[:, None]).astype(F32)).astype(np.int8)
    out = np.zeros((x.shape[0], 34), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quant_q4_0(x):
    x = np.asarray(x, F32).reshape(-1, 32)
    idx = np.argmax(np.abs(x), axis=1)  # first index of the largest |x| (ggml keeps the first)
    mx = x[np.arange(x.shape[0]), idx]
    d = (mx / F32(-8)).astype(F32)
    idv = np.where(d != 0, (F32(1) / np.where(d != 0, d, F32(1))).astype(F32), F32(0)).astype(F32)
    v = ((x * idv[:, None]).astype(F32) + F32(8.5)).astype(F32)
    qi = np.minimum(15, np.trunc(v).astype(np.int32))  # C's (int8_t) cast truncates
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = (qi[:, :16] | (qi[:, 16:] << 4)).astype(np.uint8)
    return out.tobytes()


def pack_q4k_scales(sc, m):
    """Inverse of get_scale_min_k4: sc, m (nb, 8) in 0..63 -> (nb, 12) bytes."""
    s = np.zeros((sc.shape[0], 12), np.int32)
    for j in range(8):
        if j < 4:
            s[:, j] |= sc[:, j]
            s[:, j + 4] |= m[:, j]
        else:
            s[:, j + 4] |= (sc[:, j] & 0xF) | ((m[:, j] & 0xF) << 4)
            s[:, j - 4] |= (sc[:, j] >> 4) << 6
            s[:, j] |= (m[:, j] >> 4) << 6
    return s.astype(np.uint8)


def quant_q4_k(x):
    x = np.asarray(x, F32).reshape(-1, 8, 32).astype(np.float64)
    nb = x.shape[0]
    mn = np.minimum(x.min(axis=2), 0.0)      # value = d*sc*q - dmin*m, q in 0..15, offset >= 0
    scale = (x.max(axis=2) - mn) / 15.0
    d = f16_bits_to_f32(f32_to_f16_bits(scale.max(axis=1) / 63.0)).astype(np.float64)
    dmin = f16_bits_to_f32(f32_to_f16_bits((-mn).max(axis=1) / 63.0)).astype(np.float64)
    sc = np.clip(np.where(d[:, None] > 0, np.ceil(scale / np.where(d[:, None] > 0, d[:, None], 1)), 0), 0, 63)
    m = np.clip(np.where(dmin[:, None] > 0, np.ceil(-mn / np.where(dmin[:, None] > 0, dmin[:, None], 1)), 0), 0, 63)
    step = d[:, None] * sc
    off = dmin[:, None] * m
    q = np.clip(np.round((x + off[:, :, None]) / np.where(step > 0, step, 1)[:, :, None]), 0, 15).astype(np.int32)
    q[step == 0] = 0
    out = np.zeros((nb, 144), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = f32_to_f16_bits(dmin).view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = pack_q4k_scales(sc.astype(np.int32), m.astype(np.int32))
    for j in range(4):
        out[:, 16 + 32 * j:16 + 32 * j + 32] = (q[:, 2 * j] | (q[:, 2 * j + 1] << 4)).astype(np.uint8)
    return out.tobytes()


def quant_q6_k(x):
    x = np.asarray(x, F32).reshape(-1, 16, 16).astype(np.float64)
    nb = x.shape[0]
    scale = np.abs(x).max(axis=2) / 31.0          # q in -32..31
    d = f16_bits_to_f32(f32_to_f16_bits(scale.max(axis=1) / 127.0)).astype(np.float64)
    sc = np.clip(np.where(d[:, None] > 0, np.ceil(scale / np.where(d[:, None] > 0, d[:, None], 1)), 0), 0, 127)
    step = d[:, None] * sc
    q = np.clip(np.round(x / np.where(step > 0, step, 1)[:, :, None]), -32, 31).astype(np.int32)
    q[step == 0] = 0
    q = (q + 32).reshape(nb, 256)  # 0..63
    out = np.zeros((nb, 210), np.uint8)
    for half in range(2):
        Q = q[:, 128 * half:128 * half + 128]
        ql = np.zeros((nb, 64), np.int32)
        qh = np.zeros((nb, 32), np.int32)
        for l in range(32):
            q1, q2, q3, q4 = Q[:, l], Q[:, l + 32], Q[:, l + 64], Q[:, l + 96]
            ql[:, l] = (q1 & 0xF) | ((q3 & 0xF) << 4)
            ql[:, l + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4)
            qh[:, l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
        out[:, 64 * half:64 * half + 64] = ql.astype(np.uint8)
        out[:, 128 + 32 * half:128 + 32 * half + 32] = qh.astype(np.uint8)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    return out.tobytes()


QUANT = {GGML_Q8_0: quant_q8_0, GGML_Q4_0: quant_q4_0, GGML_Q4_K: quant_q4_k, GGML_Q6_K: quant_q6_k}


def random_blocks(gtype, nblocks, rng):
    """Random valid blocks: random bytes, with every f16 scale a finite value of varied magnitude
    (including 0, negative and subnormal ones)."""
    name, be, bb = GGML_TYPES[gtype]
    raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)

    def scales(k):
        v = (rng.standard_normal(k) * np.exp(rng.uniform(-12, 2, k))).astype(F32)
        v[::7] = 0
        v[3::11] = 6e-8  # an f16 subnormal
        return f32_to_f16_bits(v).view(np.uint8).reshape(-1, 2)

    if gtype in (GGML_Q8_0, GGML_Q4_0):
        raw[:, 0:2] = scales(nblocks)
    elif gtype == GGML_Q4_K:
        raw[:, 0:2] = scales(nblocks)
        raw[:, 2:4] = scales(nblocks)
    elif gtype == GGML_Q6_K:
        raw[:, 208:210] = scales(nblocks)
    return raw.tobytes()


def random_plain(gtype, n, rng):
    v = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 8, n))).astype(F32)
    v[::13] = 0
    v[5::17] = -0.0
    if gtype == GGML_F32:
        return v.astype("<f4").tobytes()
    if gtype == GGML_F16:
        bits = f32_to_f16_bits(v)
        bits[(bits & 0x7c00) == 0x7c00] = 0x3c00  # no inf/NaN
        return bits.astype("<u2").tobytes()
    bits = f32_to_bf16(v)
    return bits.astype("<u2").tobytes()


# ---- the container ----
def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == T_STR:
        return gstr(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)
    return struct.pack(SCALAR_FMT[t], v)


def build_gguf(kvs, tensors, version=3, alignment=32, magic=GGUF_MAGIC, n_tensors=None, n_kv=None):
    """kvs: [(key, type, value)] (arrays: value = (elem_type, [items])); tensors: [dict(name, type,
    ne, data[, offset])] (offset defaults to the next aligned position). Returns the file's bytes.
    n_tensors / n_kv override the counts written (for damaged files)."""
    out = bytearray(magic + struct.pack("<I", version))
    out += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gvalue(t, v)
    pos = 0
    offsets = []
    for t in tensors:
        off = t.get("offset")
        if off is None:
            off = (pos + alignment - 1) // alignment * alignment
        offsets.append(off)
        if off + len(t["data"]) < 1 << 28:  # an offset far outside (a damaged file) gets no data
            pos = max(pos, off + len(t["data"]))
        out += gstr(t["name"]) + struct.pack("<I", len(t["ne"])) + b"".join(struct.pack("<Q", n) for n in t["ne"])
        out += struct.pack("<IQ", t["type"], off)
    out += b"\0" * ((-len(out)) % alignment)
    data = bytearray(pos)
    for t, off in zip(tensors, offsets):
        if off + len(t["data"]) <= pos:
            data[off:off + len(t["data"])] = t["data"]
    out += data
    return bytes(out)


class Reader:
    """Parses a GGUF file: version, kv (key -> (type, value)), tensors (name -> (type, ne, offset)),
    data_start, alignment; raw(name) gives a tensor's bytes."""

    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.p = 0
        if self.b[:4] != GGUF_MAGIC:
            raise ValueError("bad magic")
        self.p = 4
        self.version = self.u("<I")
        if self.version not in (2, 3):
            raise ValueError("version %d" % self.version)
        nt, nkv = self.u("<Q"), self.u("<Q")
        self.kv_order, self.kv = [], {}
        for _ in range(nkv):
            k = self.s()
            t = self.u("<I")
            self.kv[k] = (t, self.val(t))
            self.kv_order.append(k)
        self.tensors, self.order = {}, []
        for _ in range(nt):
            name = self.s()
            nd = self.u("<I")
            ne = [self.u("<Q") for _ in range(nd)]
            gt, off = self.u("<I"), self.u("<Q")
            self.tensors[name] = (gt, ne, off)
            self.order.append(name)
        self.alignment = self.kv.get("general.alignment", (T_U32, 32))[1]
        self.header_end = self.p
        self.data_start = (self.p + self.alignment - 1) // self.alignment * self.alignment

    def u(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def s(self):
        n = self.u("<Q")
        v = self.b[self.p:self.p + n].decode("utf-8")
        self.p += n
        return v

    def val(self, t):
        if t == T_STR:
            return self.s()
        if t == T_ARR:
            et, n = self.u("<I"), self.u("<Q")
            return (et, [self.val(et) for _ in range(n)])
        return self.u(SCALAR_FMT[t])

    def nbytes(self, name):
        gt, ne, _ = self.tensors[name]
        _, be, bb = GGML_TYPES[gt]
        n = int(np.prod(ne))
        return n // be * bb

    def raw(self, name):
        off = self.data_start + self.tensors[name][2]
        return self.b[off:off + self.nbytes(name)]

    def array(self, name):
        """The tensor dequantised to float32 in the native (row-major, slowest dim first) shape."""
        gt, ne, _ = self.tensors[name]
        return dequantize(gt, self.raw(name), int(np.prod(ne))).reshape(list(reversed(ne)))


# ---- speclab native safetensors ----
def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, e in h.items():
        s, t = e["data_offsets"]
        raw = b[base + s:base + t]
        tensors[name] = (e["dtype"], e["shape"], raw)
    return meta, tensors


def native_f32(dtype, raw):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4").astype(F32)
    if dtype == "F16":
        return f16_bits_to_f32(np.frombuffer(raw, "<u2"))
    if dtype == "BF16":
        return bf16_to_f32(np.frombuffer(raw, "<u2"))
    raise ValueError(dtype)


def shortest_f32(x):
    """Shortest decimal that reads back as the same float32 (what the config JSON round trip wants)."""
    f = F32(x)
    for p in range(1, 10):
        s = "%.*g" % (p, float(f))
        if F32(float(s)) == f:
            return float(s)
    return float(f)


def gguf_tensor_plan(meta, tensors):
    """[(gguf name, native array name(s), split)]: the mapping of FORMAT.md's names to llama.cpp's."""
    arch = meta["arch"]
    cfg = json.loads(meta["config"])
    plan = [("token_embd.weight", ["tok_emb.weight"])]
    if arch == "gpt2":
        plan.append(("position_embd.weight", ["pos_emb.weight"]))
    for i in range(cfg["n_layer"]):
        L, B = "layers.%d." % i, "blk.%d." % i
        if arch == "gpt2":
            plan += [(B + "attn_norm.weight", [L + "attn_norm.weight"]), (B + "attn_norm.bias", [L + "attn_norm.bias"]),
                     (B + "attn_qkv.weight", [L + "attn.q.weight", L + "attn.k.weight", L + "attn.v.weight"]),
                     (B + "attn_qkv.bias", [L + "attn.q.bias", L + "attn.k.bias", L + "attn.v.bias"]),
                     (B + "attn_output.weight", [L + "attn.o.weight"]), (B + "attn_output.bias", [L + "attn.o.bias"]),
                     (B + "ffn_norm.weight", [L + "mlp_norm.weight"]), (B + "ffn_norm.bias", [L + "mlp_norm.bias"]),
                     (B + "ffn_up.weight", [L + "mlp.up.weight"]), (B + "ffn_up.bias", [L + "mlp.up.bias"]),
                     (B + "ffn_down.weight", [L + "mlp.down.weight"]), (B + "ffn_down.bias", [L + "mlp.down.bias"])]
        else:
            # llama.cpp's llama arch rotates adjacent pairs (rope type NORM) and its HF converter
            # un-permutes q/k back to Meta's layout: GGUF rows are the native rows as they are.
            plan += [(B + "attn_norm.weight", [L + "attn_norm.weight"]), (B + "attn_q.weight", [L + "attn.q.weight"]),
                     (B + "attn_k.weight", [L + "attn.k.weight"]), (B + "attn_v.weight", [L + "attn.v.weight"]),
                     (B + "attn_output.weight", [L + "attn.o.weight"]), (B + "ffn_norm.weight", [L + "mlp_norm.weight"]),
                     (B + "ffn_gate.weight", [L + "mlp.gate.weight"]), (B + "ffn_up.weight", [L + "mlp.up.weight"]),
                     (B + "ffn_down.weight", [L + "mlp.down.weight"])]
    plan.append(("output_norm.weight", ["final_norm.weight"]))
    if arch == "gpt2":
        plan.append(("output_norm.bias", ["final_norm.bias"]))
    if "lm_head.weight" in tensors:
        plan.append(("output.weight", ["lm_head.weight"]))
    return plan


def gguf_kvs(meta, name="speclab model"):
    arch = meta["arch"]
    cfg = json.loads(meta["config"])
    a = arch + "."
    kvs = [("general.architecture", T_STR, arch), ("general.alignment", T_U32, 32), ("general.name", T_STR, name),
           (a + "context_length", T_U32, cfg["max_seq_len"]), (a + "embedding_length", T_U32, cfg["d_model"]),
           (a + "block_count", T_U32, cfg["n_layer"]), (a + "feed_forward_length", T_U32, cfg["d_ff"]),
           (a + "attention.head_count", T_U32, cfg["n_head"])]
    eps = float(cfg.get("norm_eps", 1e-5))
    if arch == "llama":
        kvs += [(a + "attention.head_count_kv", T_U32, cfg.get("n_kv_head", cfg["n_head"])),
                (a + "attention.layer_norm_rms_epsilon", T_F32, eps),
                (a + "rope.freq_base", T_F32, float(cfg.get("rope_theta", 10000.0))),
                (a + "rope.dimension_count", T_U32, cfg["d_model"] // cfg["n_head"])]
    else:
        kvs += [(a + "attention.layer_norm_epsilon", T_F32, eps)]
    tok = meta.get("tokenizer")
    if tok:
        t = json.loads(tok)
        if t["type"] == "byte-bpe":
            special = t.get("special", {})
            ids = set(special.values())
            kvs += [("tokenizer.ggml.model", T_STR, "gpt2"), ("tokenizer.ggml.pre", T_STR, "gpt-2"),
                    ("tokenizer.ggml.tokens", T_ARR, (T_STR, t["vocab"])),
                    ("tokenizer.ggml.token_type", T_ARR, (T_I32, [3 if i in ids else 1 for i in range(len(t["vocab"]))])),
                    ("tokenizer.ggml.merges", T_ARR, (T_STR, t["merges"]))]
            if "<|endoftext|>" in special:
                kvs += [("tokenizer.ggml.bos_token_id", T_U32, special["<|endoftext|>"]),
                        ("tokenizer.ggml.eos_token_id", T_U32, special["<|endoftext|>"])]
        elif t["type"] == "sp-bpe":
            kvs += [("tokenizer.ggml.model", T_STR, "llama"),
                    ("tokenizer.ggml.tokens", T_ARR, (T_STR, t["pieces"])),
                    ("tokenizer.ggml.scores", T_ARR, (T_F32, [float(s) for s in t["scores"]])),
                    ("tokenizer.ggml.token_type", T_ARR, (T_I32, [int(x) for x in t["types"]]))]
            for k, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("unk", "unknown_token_id")):
                if t.get(k, -1) >= 0:
                    kvs.append(("tokenizer.ggml." + key, T_U32, t[k]))
            kvs += [("tokenizer.ggml.add_bos_token", T_BOOL, bool(t.get("add_bos", True))),
                    ("tokenizer.ggml.add_eos_token", T_BOOL, bool(t.get("add_eos", False))),
                    ("tokenizer.ggml.add_space_prefix", T_BOOL, bool(t.get("add_dummy_prefix", True)))]
        else:
            raise ValueError("unknown tokenizer type " + t["type"])
    return kvs


def pick_type(dtype, native_dtype, shape):
    """ggml type of a tensor: 1-D -> F32; keep -> the native dtype; quantised types fall back when
    the row length (ne[0] = shape[-1]) is not a multiple of the block size."""
    if len(shape) == 1:
        return GGML_F32
    if dtype == "keep":
        return {"F32": GGML_F32, "F16": GGML_F16, "BF16": GGML_BF16}[native_dtype]
    t = DTYPE_TO_GGML[dtype]
    row = shape[-1]
    if t in (GGML_Q4_K, GGML_Q6_K) and row % 256:
        t = GGML_Q8_0
    if t in (GGML_Q8_0, GGML_Q4_0) and row % 32:
        t = GGML_F16
    return t


def encode_tensor(gtype, x, native_dtype=None, native_raw=None):
    if gtype == GGML_F32:
        return x.astype("<f4").tobytes()
    if gtype == GGML_F16:
        if native_dtype == "F16":
            return native_raw
        return f32_to_f16_bits(x).astype("<u2").tobytes()
    if gtype == GGML_BF16:
        if native_dtype == "BF16":
            return native_raw
        return f32_to_bf16(x).astype("<u2").tobytes()
    return QUANT[gtype](x)


def build_model_tensors(meta, tensors, dtype="keep", random_seed=None):
    rng = np.random.default_rng(random_seed) if random_seed is not None else None
    out = []
    for gname, srcs in gguf_tensor_plan(meta, tensors):
        parts = [tensors[s] for s in srcs]
        x = np.concatenate([native_f32(dt, raw).reshape(shape) for dt, shape, raw in parts], axis=0)
        ndt = parts[0][0] if len(parts) == 1 else None
        nraw = parts[0][2] if len(parts) == 1 else None
        if len(parts) > 1 and all(p[0] == parts[0][0] for p in parts):
            ndt, nraw = parts[0][0], b"".join(p[2] for p in parts)
        gt = pick_type(dtype, ndt or "F32", list(x.shape))
        if rng is not None and gt in QUANT:
            _, be, _ = GGML_TYPES[gt]
            data = random_blocks(gt, x.size // be, rng)
        else:
            data = encode_tensor(gt, x.reshape(-1), ndt, nraw)
        out.append({"name": gname, "type": gt, "ne": list(reversed(x.shape)), "data": data})
    return out


def write_model(src, dst, dtype="keep", version=3, random_seed=None):
    meta, tensors = read_safetensors(src)
    kvs = gguf_kvs(meta)
    ts = build_model_tensors(meta, tensors, dtype, random_seed)
    b = build_gguf(kvs, ts, version=version)
    with open(dst, "wb") as f:
        f.write(b)


def check(gguf_path, src, dtype="keep"):
    """Independent reading of a GGUF (e.g. the C writer's) against the native source. Returns a list
    of problems (empty = all equal)."""
    meta, tensors = read_safetensors(src)
    r = Reader(gguf_path)
    bad = []
    if r.version not in (2, 3):
        bad.append("version %d" % r.version)
    if r.alignment != 32:
        bad.append("alignment %r" % (r.alignment,))
    if r.data_start % r.alignment:
        bad.append("data start not aligned")
    for k, t, v in gguf_kvs(meta):
        if k == "general.name":
            if k not in r.kv or r.kv[k][0] != T_STR:
                bad.append("general.name missing")
            continue
        if k not in r.kv:
            bad.append("key %s missing" % k)
            continue
        rt, rv = r.kv[k]
        if t == T_F32:
            ok = rt == T_F32 and F32(rv) == F32(v)
        elif t == T_ARR and v[0] == T_F32:
            ok = rt == T_ARR and rv[0] == T_F32 and np.array_equal(np.array(rv[1], F32), np.array(v[1], F32))
        else:
            ok = rt == t and rv == v
        if not ok:
            bad.append("key %s: %r (type %d), expected %r (type %d)" % (k, str(rv)[:80], rt, str(v)[:80], t))
    want = build_model_tensors(meta, tensors, dtype)
    if sorted(r.tensors) != sorted(t["name"] for t in want):
        bad.append("tensor names differ: %s vs %s" % (sorted(r.tensors), sorted(t["name"] for t in want)))
        return bad
    end = 0
    for t in want:
        gt, ne, off = r.tensors[t["name"]]
        if off % r.alignment:
            bad.append("%s: offset %d not aligned" % (t["name"], off))
        if gt != t["type"] or ne != t["ne"]:
            bad.append("%s: type %d ne %s, expected type %d ne %s" % (t["name"], gt, ne, t["type"], t["ne"]))
            continue
        if r.raw(t["name"]) != t["data"]:
            bad.append("%s: data differs" % t["name"])
        end = max(end, r.data_start + off + len(t["data"]))
    if end > len(r.b):
        bad.append("tensor data past the end of the file")
    return bad


def write_blocks(outdir, seed=1):
    rng = np.random.default_rng(seed)
    ts = []
    for gt in (GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_K, GGML_Q6_K):
        name, be, bb = GGML_TYPES[gt]
        n = 256 * 40  # 40 super-blocks, 320 small blocks, 10240 plain values
        ne = [512, n // 512]
        raw = random_plain(gt, n, rng) if be == 1 else random_blocks(gt, n // be, rng)
        ts.append({"name": name, "type": gt, "ne": ne, "data": raw})
        dequantize(gt, raw, n).astype("<f4").tofile("%s/%s.f32" % (outdir, name))
    with open(outdir + "/blocks.gguf", "wb") as f:
        f.write(build_gguf([("general.architecture", T_STR, "none"), ("general.alignment", T_U32, 32)], ts))


def write_safetensors(path, meta, tensors):
    """tensors: [(name, float32 array)] written as F32, in order, no gaps (safetensors' rules)."""
    header, pos, blobs = {"__metadata__": meta}, 0, []
    for name, a in tensors:
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        pos += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((-(8 + len(h))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def to_native(gguf_path, out_path):
    r = Reader(gguf_path)
    arch = r.kv["general.architecture"][1]
    a = arch + "."
    g = lambda k, d=None: r.kv[a + k][1] if a + k in r.kv else d
    emb = r.array("token_embd.weight")
    cfg = {"vocab_size": emb.shape[0], "n_layer": g("block_count"), "n_head": g("attention.head_count"),
           "n_kv_head": g("attention.head_count_kv", g("attention.head_count")), "d_model": g("embedding_length"),
           "d_ff": g("feed_forward_length"), "max_seq_len": g("context_length"),
           "norm_eps": shortest_f32(g("attention.layer_norm_rms_epsilon" if arch == "llama" else
                                      "attention.layer_norm_epsilon")),
           "tied_embeddings": "output.weight" not in r.tensors}
    if arch == "llama":
        cfg["rope_theta"] = shortest_f32(g("rope.freq_base", 10000.0))
    meta = {"format": "speclab-model", "format_version": "1", "arch": arch, "config": json.dumps(cfg)}
    fake = {"lm_head.weight": 1} if not cfg["tied_embeddings"] else {}
    out = []
    d = cfg["d_model"]
    for gname, srcs in gguf_tensor_plan(meta, fake):
        x = r.array(gname)
        if len(srcs) == 3:  # gpt2's q | k | v rows
            for i, s in enumerate(srcs):
                out.append((s, x[i * d:(i + 1) * d]))
        else:
            out.append((srcs[0], x))
    write_safetensors(out_path, meta, out)


def dump(path):
    r = Reader(path)
    print("version %d, %d tensors, %d keys, alignment %d, data at %d" % (r.version, len(r.tensors), len(r.kv),
                                                                        r.alignment, r.data_start))
    for k in r.kv_order:
        t, v = r.kv[k]
        if t == T_ARR:
            v = "array of %d (type %d): %s" % (len(v[1]), v[0], str(v[1][:8])[:100])
        print("  %s [%d] = %s" % (k, t, v))
    for n in r.order:
        gt, ne, off = r.tensors[n]
        print("  %s %s %s @%d" % (n, GGML_TYPES.get(gt, ("?",))[0], ne, off))


def main(argv):
    args = list(argv)

    def opt(name, default):
        if name in args:
            i = args.index(name)
            v = args[i + 1]
            del args[i:i + 2]
            return v
        return default

    dtype = opt("--dtype", "keep")
    version = int(opt("--version", "3"))
    rseed = opt("--random-blocks", None)
    seed = int(opt("--seed", "1"))
    if args and args[0] == "--check":
        bad = check(args[1], args[2], dtype)
        for b in bad:
            print("gguf check: " + b)
        print("gguf check: %s: %s" % (args[1], "OK" if not bad else "%d problems" % len(bad)))
        return 1 if bad else 0
    if args and args[0] == "--blocks":
        write_blocks(args[1], seed)
        return 0
    if args and args[0] == "--to-native":
        to_native(args[1], args[2])
        return 0
    if args and args[0] == "--dump":
        dump(args[1])
        return 0
    if len(args) != 2 or dtype not in ("keep",) + tuple(DTYPE_TO_GGML) or version not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    write_model(args[0], args[1], dtype, version, None if rseed is None else int(rseed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
