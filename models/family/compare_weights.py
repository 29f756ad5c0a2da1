#!/usr/bin/env python3
"""compare_weights.py A.safetensors B.safetensors: how far two trainings of one model ended apart,
tensor by tensor: the share of values that are bit-identical, the largest absolute difference, and
that difference over the tensor's largest |value|; first line: whether the whole tensor payloads
(everything after the JSON header, so training metadata such as wall time is ignored) are
byte-identical. Both files must hold the same tensor names, shapes and dtypes (else one line, exit 2).
Used for the reproducibility checks in models/README.md ("Reproduce")."""
import hashlib
import json
import struct
import sys

import numpy as np

DT = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16}


def fail(msg):
    print("compare_weights: " + msg, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        b = open(path, "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n])
    except (OSError, struct.error, ValueError) as e:
        fail("%s: not a safetensors file (%s)" % (path, e))
    body = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        if v.get("dtype") not in DT:
            fail("%s: tensor %s has dtype %s" % (path, k, v.get("dtype")))
        lo, hi = v["data_offsets"]
        a = np.frombuffer(body[lo:hi], dtype=DT[v["dtype"]])
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[k] = (v["dtype"], tuple(v["shape"]), a.astype(np.float64))
    return out, hashlib.sha256(body).hexdigest()


def main():
    if len(sys.argv) != 3:
        fail("usage: compare_weights.py A.safetensors B.safetensors")
    (a, ha), (b, hb) = load(sys.argv[1]), load(sys.argv[2])
    if sorted(a) != sorted(b):
        fail("the files hold different tensors")
    print("payload %s (sha256 %s... vs %s...)" % ("identical" if ha == hb else "differs", ha[:12], hb[:12]))
    print("%-32s %10s %10s %12s %12s" % ("tensor", "values", "identical", "max |diff|", "rel to max"))
    for k in sorted(a):
        (da, sa, x), (db, sb, y) = a[k], b[k]
        if (da, sa) != (db, sb):
            fail("tensor %s: %s %s vs %s %s" % (k, da, sa, db, sb))
        d = np.abs(x - y).max() if x.size else 0.0
        m = np.abs(y).max() if y.size else 0.0
        print("%-32s %10d %10.4f %12.3e %12.3e" % (k, x.size, (x == y).mean() if x.size else 1.0, d, d / m if m else 0.0))


if __name__ == "__main__":
    main()
