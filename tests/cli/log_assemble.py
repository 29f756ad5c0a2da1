#!/usr/bin/env python3
"""The assembly of a measure log from its shards (analysis/sl_log_write.c, log_assemble), read back
by h5py against the shards themselves (also read by h5py, concatenated in shard order): every
table's every column equal, exactly. Two layouts: shards of exactly one distribution chunk each
(rows per shard a multiple of the chunk rows, which the writer picks so when it can: the stored chunks are copied as they are, dist_copy_chunk), and
shards that end mid-chunk (rows re-buffered and re-encoded: table_w_append_from), for float32
(chunks stored raw) and float16 (chunks deflated when that saves 10%)."""
import os, subprocess, sys, tempfile
import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
fail = 0

def check(ok, what):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail = 1

with tempfile.TemporaryDirectory() as d:
    # V = 2048: float32 rows of 8 KiB, chunks of about 1 MiB = 128 rows, or a divisor of the rows of
    # a shard between 64 and 128 (100 rows: chunks of 100); 131 rows (prime): chunks of 128, and the
    # shards end mid-chunk. float16: rows of 4 KiB, 256 rows, 257 (prime) ends mid-chunk.
    for dist, tokens, label in [("float32", 100, "one chunk per shard"), ("float32", 131, "shards end mid-chunk"),
                                ("float16", 256, "one chunk per shard"), ("float16", 257, "shards end mid-chunk")]:
        out = os.path.join(d, f"{dist}_{tokens}.h5")
        r = subprocess.run([S, "measure", "--synthetic", "tempered", "--vocab", "2048", "--sequences", "3",
                            "--tokens", str(tokens), "--shard-sequences", "1", "--dist", dist, "--seed", "3",
                            "--out", out, "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            check(False, f"{dist} {label}: measure exit {r.returncode}: {r.stderr.strip()}")
            continue
        shards = sorted(f for f in os.listdir(out + ".d") if f.startswith("shard-") and f.endswith(".h5"))
        with h5py.File(out, "r") as f:
            chunks = f["distributions/p"].chunks
            aligned = tokens % chunks[0] == 0
            check(aligned == (label == "one chunk per shard"),
                  f"{dist}, {tokens} rows per shard: chunks of {chunks[0]} rows ({'' if aligned else 'not '}whole chunks)")
            bad, n = [], 0
            for g in ["distributions", "positions", "sequences", "prompts"]:
                for c in f[g]:
                    parts = []
                    for s in shards:
                        with h5py.File(os.path.join(out + ".d", s), "r") as sf:
                            parts.append(sf[g][c][()])
                    n += 1
                    if not np.array_equal(np.concatenate(parts), f[g][c][()]):
                        bad.append(f"{g}/{c}")
        check(not bad and len(shards) == 3,
              f"{dist}, {tokens} rows per shard ({label}, chunks {chunks}): {n} datasets = the shards concatenated"
              + (f"; differ: {bad}" if bad else ""))
sys.exit(fail)
