#!/usr/bin/env python3
"""pattern_tok.py DIR SEED PERIOD REPEATS NOISE_EVERY VALID_SHIFT: a learnable toy corpus for the
trainer's CLI tests (sourced by them, not run as a test): DIR/train.tok is a random pattern of
PERIOD ids (vocabulary 64, random.seed(SEED)) repeated REPEATS times with every NOISE_EVERY-th id
replaced by a random one; DIR/valid.tok is the clean pattern repeated 20 times, starting at offset
VALID_SHIFT. Token files as models/TOKFILE.md."""
import random
import struct
import sys


def write_tok(path, ids, vocab):
    with open(path, "wb") as f:
        f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", vocab, 2, len(ids)) + struct.pack("<%dH" % len(ids), *ids))


if __name__ == "__main__":
    d, seed, period, repeats, noise, shift = sys.argv[1], *map(int, sys.argv[2:7])
    random.seed(seed)
    pat = [random.randrange(64) for _ in range(period)]
    ids = pat * repeats
    for i in range(0, len(ids), noise):
        ids[i] = random.randrange(64)
    write_tok(d + "/train.tok", ids, 64)
    write_tok(d + "/valid.tok", (pat * 20)[shift:], 64)
