#!/usr/bin/python3
"""Decode speed of llama.cpp (node-llama-cpp 3.21.1, CPU) and speclab on the same model: informational,
not a test (tests/peer/README.md has the numbers).

    /usr/bin/python3 tests/peer/bench_decode.py [MODEL.safetensors] [--rounds R] [--tokens N] [--threads 1,2]

MODEL (default models/family/target.safetensors) is written as GGUF F32 and F16 (`speclab model
convert --to gguf`, or tests/importers/gguf_write.py when speclab cannot write GGUF). Each round runs,
for 1 and 2 threads (--threads), one after the other (the machine is shared, so runs alternate instead of
batching one kind): llama.cpp greedy on the F32 and the F16 file with the comparison context (F32
KV cache, no flash attention) and with llama.cpp's default one (F16 KV cache, flash attention auto),
and `speclab generate --autoregressive --temperature 0 --eos -1` on the native file and on both
GGUFs (when speclab reads GGUF). One prompt token (id 0), N new tokens (default 128). Prints each
run and then the median and best tokens/s per configuration.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
SPECLAB = os.environ.get("SPECLAB", "build/speclab")
GGUF_WRITE = os.environ.get("GGUF_WRITE", "tests/importers/gguf_write.py")


def llamacpp(gguf, threads, n, kv):
    r = subprocess.run(["node", "tests/peer/llamacpp_probs.mjs", "bench", gguf, "--n", str(n), "--threads", str(threads),
                        "--kv", kv], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["tokens_per_s"]


def speclab(model, threads, n):
    r = subprocess.run([SPECLAB, "generate", "--autoregressive", "--target", model, "--prompt-ids", "0", "--tokens",
                        str(n), "--temperature", "0", "--eos", "-1", "--format", "json"],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)["decoding"][0]["tokens_per_s"]


def main(argv):
    model, rounds, n, thread_list = "models/family/target.safetensors", 3, 128, [1, 2]
    i = 0
    while i < len(argv):
        if argv[i] == "--rounds":
            rounds = int(argv[i + 1]); i += 2
        elif argv[i] == "--threads":
            thread_list = [int(x) for x in argv[i + 1].split(",")]; i += 2
        elif argv[i] == "--tokens":
            n = int(argv[i + 1]); i += 2
        else:
            model = argv[i]; i += 1
    tmp = tempfile.mkdtemp(prefix="bench_decode.")
    try:
        return run(model, rounds, n, thread_list, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(model, rounds, n, thread_list, tmp):
    ggufs = {}
    for dt in ("f32", "f16"):
        out = os.path.join(tmp, f"model.{dt}.gguf")
        r = subprocess.run([SPECLAB, "model", "convert", model, out, "--to", "gguf", "--dtype", dt], capture_output=True)
        if r.returncode != 0:
            subprocess.run([sys.executable, GGUF_WRITE, model, out, "--dtype", dt], check=True, capture_output=True)
        ggufs[dt] = out
    results = {}
    for rnd in range(rounds):
        for threads in thread_list:
            runs = [(f"llama.cpp GGUF {dt.upper()} kv {kv}", lambda dt=dt, kv=kv: llamacpp(ggufs[dt], threads, n, kv))
                    for dt in ("f32", "f16") for kv in ("f32", "f16")]
            runs.append(("speclab native", lambda: speclab(model, threads, n)))
            runs += [(f"speclab GGUF {dt.upper()}", lambda dt=dt: speclab(ggufs[dt], threads, n)) for dt in ("f32", "f16")]
            for name, fn in runs:
                v = fn()
                if v is None:
                    continue
                results.setdefault((name, threads), []).append(v)
                print(f"round {rnd} threads {threads} {name}: {v:.1f} tokens/s", flush=True)
    print(f"\n{n} tokens after a 1-token prompt, greedy; tokens/s median (best) of {rounds} rounds")
    for (name, threads), v in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  threads {threads}  {name:32s} {statistics.median(v):7.1f} ({max(v):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
