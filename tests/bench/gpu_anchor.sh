#!/usr/bin/env bash
# gpu_anchor.sh: `--device cuda` decoding against the PyTorch anchor (tests/bench/torch_anchor.py:
# plain PyTorch, static KV cache, the step as one CUDA graph), same model, same GPU, alternated
# twice: build/bench/infer_gpu_check's "graphs+pdl" decode figure (the default path) against the
# anchor's "CUDA graph" figure, both ms/token over 128 tokens after a 16-token prompt with each
# step's logits copied to the host. Prints the ratio anchor / speclab of the medians over the
# rounds as a TARGET line (issue 18 item 4: beat the anchor).
# Skips (exit 0) without build/libsl_infer_cuda.so (make cuda) or without PyTorch with CUDA.
# usage: tests/bench/gpu_anchor.sh [MODEL]   (default models/family/target.safetensors)
set -u
cd "$(dirname "$0")/../.."
M=${1:-models/family/target.safetensors}
LIB=${SL_INFER_CUDA_LIB:-build/libsl_infer_cuda.so}
if [ ! -f "$LIB" ] || [ ! -x build/bench/infer_gpu_check ]; then
  echo "skipped: no $LIB (make cuda on a machine with a GPU)"; exit 0
fi
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: no PyTorch with CUDA for the anchor"; exit 0
fi
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for r in 1 2; do
  SL_INFER_CUDA_LIB=$LIB build/bench/infer_gpu_check --device cuda "$M" > "$W/s$r" 2>&1 || { cat "$W/s$r"; exit 1; }
  python3 tests/bench/torch_anchor.py "$M" > "$W/a$r" 2>&1 || { cat "$W/a$r"; exit 1; }
  cat "$W/s$r" "$W/a$r"
done
python3 - "$W" <<'PY'
import re, statistics, sys
w = sys.argv[1]
s = [float(re.search(r"graphs\+pdl\s*: decode ([0-9.]+) ms/token", open(f"{w}/s{r}").read()).group(1)) for r in (1, 2)]
a = [float(re.search(r"CUDA graph ([0-9.]+) ms/token", open(f"{w}/a{r}").read()).group(1)) for r in (1, 2)]
ratio = statistics.median(a) / statistics.median(s)
print(f"speclab --device cuda decode {s} ms/token, PyTorch anchor {a} ms/token: anchor / speclab {ratio:.3f}")
print(f"TARGET gpu_decode_vs_torch_anchor value={ratio:.4f} target=>1 unit=ratio {'MET' if ratio > 1 else 'MISSED'}")
PY
