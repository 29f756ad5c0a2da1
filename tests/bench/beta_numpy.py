#!/usr/bin/env python3
"""The h5py + numpy side of the analyze benchmark: beta = sum_x min(p(x), q(x)) for every logged
position of a speclab measure log, from /distributions/p and /distributions/q, streamed in blocks of
whole HDF5 chunks (bounded memory, as speclab does), summed in float64; prints alpha = mean beta."""
import sys
import h5py
import numpy as np

f = h5py.File(sys.argv[1], "r")
dp, dq = f["distributions/p"], f["distributions/q"]
n = dp.shape[0]
block = dp.chunks[0] * 8
total = 0.0
for a in range(0, n, block):
    p = dp[a:a + block].astype(np.float32, copy=False)
    q = dq[a:a + block].astype(np.float32, copy=False)
    total += np.minimum(p, q, out=p).sum(axis=1, dtype=np.float64).sum()
print(f"{total / n:.10f}")
