#!/usr/bin/env python3
"""gpu_pack.py: a model file made small enough to travel to the lent GPU machine, and back again.

A trip carries at most 64 MiB (the working tree and the carried build outputs together), and the
shipped target alone is 55 MB of f16 weights, which xz hardly shrinks as they are. Split by byte
position instead, the high bytes (sign, exponent and two mantissa bits of each f16) compress
well and the low bytes not at all:

    gpu_pack.py pack MODEL.safetensors PREFIX     # PREFIX.hi.xz (odd bytes, xz) + PREFIX.lo (even bytes)
    gpu_pack.py unpack PREFIX MODEL.safetensors   # the same bytes again (checked by length and SHA-256)

The split is byte by byte over the whole file, header included, so any file round-trips; the
length and SHA-256 of the original are kept in PREFIX.sum and checked after unpacking.
"""
import hashlib
import lzma
import sys


def pack(src, prefix):
    data = open(src, "rb").read()
    open(prefix + ".hi.xz", "wb").write(lzma.compress(data[1::2], preset=6))
    open(prefix + ".lo", "wb").write(data[0::2])
    open(prefix + ".sum", "w").write("%d %s\n" % (len(data), hashlib.sha256(data).hexdigest()))


def unpack(prefix, dst):
    n, digest = open(prefix + ".sum").read().split()
    hi = lzma.decompress(open(prefix + ".hi.xz", "rb").read())
    lo = open(prefix + ".lo", "rb").read()
    out = bytearray(int(n))
    out[0::2] = lo
    out[1::2] = hi
    if hashlib.sha256(out).hexdigest() != digest:
        sys.exit("gpu_pack.py: %s does not unpack to the packed file (SHA-256 differs)" % prefix)
    open(dst, "wb").write(out)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit("usage: gpu_pack.py pack MODEL PREFIX | unpack PREFIX MODEL")
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])
