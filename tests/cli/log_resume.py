#!/usr/bin/env python3
"""Crash safety of speclab measure: a writer killed with SIGKILL mid-run leaves no corrupt file and
loses no finished shard; the rerun continues and its OUT.h5 holds the same content as an
uninterrupted run (every dataset and attribute, created_utc aside). Appending prompts adds shards
and re-assembles to the same content as a fresh run over the longer list."""
import os, signal, subprocess, sys, tempfile, time
import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
fail = 0

def check(ok, what):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail = 1

def cmd(out, k):
    return [S, "measure", "--synthetic", "tempered", "--vocab", "3000", "--sequences", str(k), "--tokens", "30",
            "--shard-sequences", "2", "--dist", "float16", "--seed", "9", "--out", out]

def same(a, b):
    fa, fb = h5py.File(a, "r"), h5py.File(b, "r")
    names = []
    fa.visit(names.append)
    nb = []
    fb.visit(nb.append)
    ok = sorted(names) == sorted(nb)
    for n in names:
        if ok and isinstance(fa[n], h5py.Dataset):
            ok = fa[n].shape == fb[n].shape and fa[n].dtype == fb[n].dtype and np.array_equal(fa[n][()], fb[n][()])
    ka = {k: v for k, v in fa.attrs.items() if k != "created_utc"}
    kb = {k: v for k, v in fb.attrs.items() if k != "created_utc"}
    ok = ok and ka.keys() == kb.keys() and all(np.array_equal(ka[k], kb[k]) for k in ka)
    fa.close(); fb.close()
    return ok

with tempfile.TemporaryDirectory() as d:
    ref = os.path.join(d, "ref.h5")
    subprocess.run(cmd(ref, 40), check=True, stdout=subprocess.DEVNULL)
    out = os.path.join(d, "out.h5")
    shard_dir = out + ".d"
    killed_mid = False
    for attempt in range(3):  # kill at several moments: after 2, 6, 12 shards
        want = [2, 6, 12][attempt]
        p = subprocess.Popen(cmd(out, 40), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while p.poll() is None and time.time() - t0 < 60:
            if os.path.isdir(shard_dir) and len([f for f in os.listdir(shard_dir) if f.endswith(".h5")]) >= want:
                break
            time.sleep(0.002)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed_mid = True
        p.wait()
        shards = sorted(f for f in os.listdir(shard_dir) if f.startswith("shard-") and f.endswith(".h5"))
        ok = all(h5py.is_hdf5(os.path.join(shard_dir, f)) for f in shards)
        for f in shards:
            with h5py.File(os.path.join(shard_dir, f), "r") as h:
                ok = ok and h.attrs["n_sequences"] == 2
        check(ok, f"after SIGKILL #{attempt + 1}: {len(shards)} complete shards, every one readable")
        check(not os.path.exists(out) or h5py.is_hdf5(out), f"after SIGKILL #{attempt + 1}: no corrupt {os.path.basename(out)}")
    check(killed_mid, "the writer was killed mid-run at least once")
    before = set(os.listdir(shard_dir))
    r = subprocess.run(cmd(out, 40), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    check(r.returncode == 0, "rerun after the kills completes")
    check(not any(".tmp." in f for f in os.listdir(shard_dir)), "stale temporary files removed")
    check(same(out, ref), "resumed output equals an uninterrupted run")

    # Appending prompts: 15 sequences first (the last shard holds 1), then 40.
    app = os.path.join(d, "app.h5")
    subprocess.run(cmd(app, 15), check=True, stdout=subprocess.DEVNULL)
    subprocess.run(cmd(app, 40), check=True, stdout=subprocess.DEVNULL)
    check(same(app, ref), "15 then 40 prompts equals a fresh run over 40")

    # A rerun with other settings is refused and the finished output is left as it was.
    before = open(out, "rb").read()
    bad = cmd(out, 40)
    bad[bad.index("--seed") + 1] = "10"
    r = subprocess.run(bad, capture_output=True, text=True)
    check(r.returncode == 2 and "other settings" in r.stderr and r.stderr.count("\n") == 1,
          f"other settings on resume: exit 2, one line ({r.stderr.strip()})")
    check(open(out, "rb").read() == before, "the earlier output is intact")
sys.exit(fail)
