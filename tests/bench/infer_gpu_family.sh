#!/usr/bin/env bash
# infer_gpu_family.sh: the shipped target with each draft on a device (`--device cuda`, models/
# GPU_INFERENCE.md): `speclab run` decodes 24 prose prompts x 128 tokens speculatively at gamma in
# GAMMAS and autoregressively, interleaved per prompt, at TEMPERATURE (default 1), and measures
# c (in run: draft seconds per draft step / target seconds per token) and v(n) (one target call on
# n tokens / one single-token call). Writes OUT/run-DRAFT.json (the run's report) and OUT/summary.csv: per draft
# and gamma the acceptance, the measured speedup over the same device's autoregressive decoding
# (CI over prompts), the prediction E[N]/(gamma c + v(gamma+1)) and the costs.
# usage: tests/bench/infer_gpu_family.sh OUT DRAFT...   (SPECLAB, TARGET, DEVICE, GAMMAS, TOKENS, PROMPTS, TEMPERATURE)
set -u
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
T=${TARGET:-models/family/target.safetensors}
DEV=${DEVICE:-cuda}
G=${GAMMAS:-1,2,3,4,6,8}
N=${TOKENS:-128}
if [ $# -lt 2 ]; then # run_all.sh (make bench) calls every script bare: this one needs a device and arguments
  echo "skipped: usage: tests/bench/infer_gpu_family.sh OUT DRAFT... (a GPU and build/libsl_infer_cuda.so)"; exit 0
fi
O=$1; shift
mkdir -p "$O"
head -n "${PROMPTS:-24}" data/prompts/prose.txt > "$O/prompts.txt"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
status=0
for d in "$@"; do
  name=$(basename "$d" .safetensors)
  "$S" run --device "$DEV" --target "$T" --draft "$d" --prompts "$O/prompts.txt" --tokens "$N" --gamma "$G" \
    --temperature "${TEMPERATURE:-1}" --seed 1 --cost-reps 10 --boot 1000 --out "$W/$name.h5" --quiet --format json > "$O/run-$name.json" \
    2> "$W/err" || { echo "run $name failed: $(tail -1 "$W/err")"; status=1; }
done
python3 - "$O" "$T" "$DEV" "$@" <<'PY'
import json, os, sys
out, target, dev, drafts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = []
for d in drafts:
    name = os.path.basename(d).removesuffix(".safetensors")
    try:
        r = json.load(open(f"{out}/run-{name}.json"))
    except Exception:
        continue
    v = {c["n"]: c["v"] for c in r["costs"]}
    step = [c["call_s"] for c in r["costs"] if c["n"] == 1][0]
    for s in r["sweep"]:
        g = s["gamma"]
        rows.append([name, g, s["alpha_hat"], s["tokens_per_iteration"], s["speedup"], s["speedup_ci_lo"], s["speedup_ci_hi"],
                     s["predicted_general"], s["c_in_run"], s["v_in_run"], v.get(g + 1, float("nan")), step * 1e3, s["best"]])
hdr = ["draft", "gamma", "alpha_hat", "tokens_per_iteration", "speedup", "speedup_ci_lo", "speedup_ci_hi",
       "predicted_general", "c_in_run", "v_in_run", "v_gamma_plus_1", "target_step_ms", "best"]
with open(f"{out}/summary.csv", "w") as f:
    f.write(f"# {target} on {dev}, temperature {os.environ.get('TEMPERATURE', '1')}; speedup = the device's autoregressive / speculative time per token\n")
    f.write(",".join(hdr) + "\n")
    for r in rows:
        f.write(",".join(x if isinstance(x, str) else ("%d" % x if isinstance(x, int) else "%.4g" % x) for x in r) + "\n")
best = sorted((r for r in rows if r[12] == 1), key=lambda r: -r[4])
for r in best:
    print("%-20s best gamma %d: alpha %.3f, speedup %.3f [%.3f, %.3f], predicted %.3f, c %.3f, v(g+1) %.3f, target step %.4f ms"
          % (r[0], r[1], r[2], r[4], r[5], r[6], r[7], r[8], r[10], r[11]))
PY
exit $status
