#!/usr/bin/env python3
"""gpu_pack.py: a model file made small enough to travel to the lent GPU machine, and back again.

A trip carries at most 64 MiB (the working tree and the carried build outputs together), and the
shipped target alone is 55 MB of f16 weights, which xz hardly shrinks as they are. Split by byte
position instead, the high bytes (sign, exponent and two mantissa bits of each f16) compress
well and the low bytes not at all:

    gpu_pack.py pack MODEL.safetensors PREFIX     # PREFIX.hi.xz (odd bytes, xz) + PREFIX.lo (even bytes)
    gpu_pack.py unpack PREFIX MODEL.safetensors   # the same bytes again (checked by length and SHA-256)

The split is byte by byte over the whole file, header included, so any file round-trips; the
length and SHA-256 of the original are kept in PREFIX.sum and checked before anything is written.
Neither mode replaces an existing output file. Bad input (a missing or damaged part, an existing
output): one line on stderr, exit status 2 (tests/cli/gpu_pack.sh).
"""
import hashlib
import lzma
import os
import sys


def fail(msg):
    print(f"gpu_pack.py: {msg}", file=sys.stderr)
    sys.exit(2)


def write_new(path, data):
    try:
        with open(path, "xb") as f:  # never replaces a file
            f.write(data)
    except FileExistsError:
        fail(f"{path} exists; not replaced")
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def pack(src, prefix):
    data = read(src)
    for ext in (".hi.xz", ".lo", ".sum"):
        if os.path.exists(prefix + ext):
            fail(f"{prefix + ext} exists; not replaced")
    write_new(prefix + ".hi.xz", lzma.compress(data[1::2], preset=6))
    write_new(prefix + ".lo", data[0::2])
    write_new(prefix + ".sum", b"%d %s\n" % (len(data), hashlib.sha256(data).hexdigest().encode()))


def unpack(prefix, dst):
    if os.path.exists(dst):
        fail(f"{dst} exists; not replaced")
    fields = read(prefix + ".sum").split()
    if len(fields) != 2 or not fields[0].isdigit() or len(fields[1]) != 64:
        fail(f"{prefix}.sum: not a length and a SHA-256")
    n, digest = int(fields[0]), fields[1].decode("ascii", "replace")
    try:
        hi = lzma.decompress(read(prefix + ".hi.xz"))
    except lzma.LZMAError as e:
        fail(f"{prefix}.hi.xz: {e}")
    lo = read(prefix + ".lo")
    if len(lo) != (n + 1) // 2 or len(hi) != n // 2:
        fail(f"{prefix}: the parts hold {len(lo)} + {len(hi)} bytes, the file had {n}")
    out = bytearray(n)
    out[0::2] = lo
    out[1::2] = hi
    if hashlib.sha256(out).hexdigest() != digest:
        fail(f"{prefix} does not unpack to the packed file (SHA-256 differs)")
    write_new(dst, bytes(out))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        fail("usage: gpu_pack.py pack MODEL PREFIX | unpack PREFIX MODEL")
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])
