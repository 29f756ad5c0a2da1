#!/usr/bin/env bash
# Regenerates the engine's fixture checkpoints (tests/ref/*.safetensors) with `speclab model init`.
# The reference logits (*.ref.safetensors) come from make_ref_logits.py, run where PyTorch is:
#   for m in tests/ref/{gpt2,llama}_{f32,f16}.safetensors; do
#     python3 tests/ref/make_ref_logits.py $m ${m%.safetensors}.ref.safetensors; done
set -eu
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
G='{"vocab_size":256,"n_layer":2,"n_head":4,"d_model":64,"d_ff":128,"max_seq_len":32,"norm_eps":1e-5,"tied_embeddings":true}'
L='{"vocab_size":256,"n_layer":2,"n_head":4,"n_kv_head":2,"d_model":64,"d_ff":96,"max_seq_len":32,"norm_eps":1e-5,"rope_theta":10000,"tied_embeddings":false}'
# init-std 0.2 rather than GPT-2's 0.02: larger activations make attention peaky and logits O(1),
# so a 1e-4 comparison tests something.
for dt in f32 f16; do
  "$S" model init --arch gpt2 --config "$G" --seed 11 --dtype $dt --init-std 0.2 --out tests/ref/gpt2_$dt.safetensors
  "$S" model init --arch llama --config "$L" --seed 12 --dtype $dt --init-std 0.2 --out tests/ref/llama_$dt.safetensors
done
