#!/usr/bin/env bash
# speclab's plain decoding against llama2.c's run.c and llama.cpp (node-llama-cpp 3.21.1) on the same random
# Llama, 1 and 2 threads, f32 and f16, runs alternated: tests/peer/bench_decode.py does the work and
# tests/peer/README.md says how each engine is timed. Prints TARGET lines (ratio >= 1.1) for run_all.sh.
# PEERS_SHAPE=small|110m (default 110m), PEERS_ROUNDS (3), PEERS_TOKENS (64): ~4-5 min on 2 shared cores.
set -eu
cd "$(dirname "$0")/../.."
/usr/bin/python3 tests/peer/bench_decode.py --shape "${PEERS_SHAPE:-110m}" --rounds "${PEERS_ROUNDS:-3}" \
    --tokens "${PEERS_TOKENS:-64}" --threads 1,2
# Speculative decoding: node-llama-cpp offers it (DraftSequenceTokenPredictor, a draft model's sequence
# proposing tokens to the target's); run.c does not.
