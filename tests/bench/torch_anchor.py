#!/usr/bin/env python3
"""The PyTorch anchor for `--device cuda`: plain PyTorch decoding of a speclab GPT-2 model on the GPU.

What a user would write without speclab (issue 18's baseline): float32 weights on the device, a
static KV cache of the model's full context, attention over it with a mask (static shapes), the
q/k/v products fused into one matrix, and the one-token step recorded once as a CUDA graph and
replayed. Each step copies its token in and its logits out to the host (as a sampler on the CPU
needs, and as `speclab --device cuda` does), so ms/token is comparable with
`build/bench/infer_gpu_check`'s "decode" figure: 16-token prompt, then 128 tokens one by one, the
same LCG token sequence, median of 5 repetitions.

Check: the cached, graph-replayed logits of the last step against a whole-sequence forward of the
same tokens by tests/ref/make_ref_logits.py's independent implementation (on the same GPU), bound
1e-4 of max(1, max |logit|) (float32 sums in other orders).

    python3 tests/bench/torch_anchor.py MODEL.safetensors [--reps 5]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import make_ref_logits as ref  # noqa: E402


def lcg_tokens(n, V, seed=7):
    """infer_gpu_check.c's token sequence."""
    out, s, M = [], seed, (1 << 64) - 1
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) & M
        out.append((s >> 33) % V)
    return out


class Anchor:
    def __init__(self, w, cfg, dev):
        T = lambda k: torch.from_numpy(np.ascontiguousarray(w[k], dtype=np.float32)).to(dev)
        self.cfg, self.dev = cfg, dev
        self.d, self.H = cfg["d_model"], cfg["n_head"]
        self.hd, self.L, self.M = self.d // self.H, cfg["n_layer"], cfg["max_seq_len"]
        self.eps = cfg.get("norm_eps", 1e-5)
        self.te, self.pe = T("tok_emb.weight"), T("pos_emb.weight")
        self.head = self.te if cfg.get("tied_embeddings", True) else T("lm_head.weight")
        self.fn_w, self.fn_b = T("final_norm.weight"), T("final_norm.bias")
        self.layers = []
        for i in range(self.L):
            p = "layers.%d." % i
            g = lambda k: T(p + k)
            self.layers.append(dict(
                n1w=g("attn_norm.weight"), n1b=g("attn_norm.bias"),
                wqkv=torch.cat([g("attn.q.weight"), g("attn.k.weight"), g("attn.v.weight")]).contiguous(),
                bqkv=torch.cat([g("attn.q.bias"), g("attn.k.bias"), g("attn.v.bias")]).contiguous(),
                wo=g("attn.o.weight"), bo=g("attn.o.bias"), n2w=g("mlp_norm.weight"), n2b=g("mlp_norm.bias"),
                wup=g("mlp.up.weight"), bup=g("mlp.up.bias"), wdn=g("mlp.down.weight"), bdn=g("mlp.down.bias")))
        self.kc = torch.zeros(self.L, self.M, self.H, self.hd, device=dev)
        self.vc = torch.zeros_like(self.kc)
        self.ar = torch.arange(self.M, device=dev)

    def step(self, tok, pos):
        """tok (n,) int64, pos (1,) int64 on the device; logits (n, V)."""
        n, d, H, hd = tok.shape[0], self.d, self.H, self.hd
        positions = pos + torch.arange(n, device=self.dev)
        x = self.te[tok] + self.pe[positions]
        mask = self.ar[None, :] <= positions[:, None]  # (n, M)
        for l, P in enumerate(self.layers):
            h = F.layer_norm(x, (d,), P["n1w"], P["n1b"], self.eps)
            q, k, v = torch.addmm(P["bqkv"], h, P["wqkv"].t()).split(d, 1)
            self.kc[l].index_copy_(0, positions, k.view(n, H, hd))
            self.vc[l].index_copy_(0, positions, v.view(n, H, hd))
            s = torch.einsum("thd,jhd->htj", q.view(n, H, hd), self.kc[l]) / math.sqrt(hd)
            p = torch.softmax(s.masked_fill(~mask[None], float("-inf")), -1)
            o = torch.einsum("htj,jhd->thd", p, self.vc[l]).reshape(n, d)
            x = x + torch.addmm(P["bo"], o, P["wo"].t())
            h = F.layer_norm(x, (d,), P["n2w"], P["n2b"], self.eps)
            u = F.gelu(torch.addmm(P["bup"], h, P["wup"].t()), approximate="tanh")
            x = x + torch.addmm(P["bdn"], u, P["wdn"].t())
        return F.layer_norm(x, (d,), self.fn_w, self.fn_b, self.eps) @ self.head.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    meta, w = ref.read_safetensors(a.model)
    arch, cfg = meta["arch"], json.loads(meta["config"])
    if arch != "gpt2":
        sys.exit("torch_anchor.py: %s: only gpt2 models (this one is %s)" % (a.model, arch))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    m = Anchor(w, cfg, dev)
    V, dec = cfg["vocab_size"], min(128, cfg["max_seq_len"] - 16)
    toks = lcg_tokens(16 + dec, V)
    tok_host = torch.tensor(toks, dtype=torch.int64).pin_memory()
    pos_host = torch.arange(16 + dec, dtype=torch.int64).pin_memory()
    logits_host = torch.empty(1, V).pin_memory()
    tok_buf = torch.zeros(1, dtype=torch.int64, device=dev)
    pos_buf = torch.zeros(1, dtype=torch.int64, device=dev)

    with torch.no_grad():
        s = torch.cuda.Stream()  # warm-up off the default stream, then capture
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m.step(tok_buf, pos_buf)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = m.step(tok_buf, pos_buf)

        def decode(graphed):
            m.step(torch.tensor(toks[:16], device=dev), torch.zeros(1, dtype=torch.int64, device=dev))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(dec):
                tok_buf.copy_(tok_host[16 + i:17 + i], non_blocking=True)
                pos_buf.copy_(pos_host[16 + i:17 + i], non_blocking=True)
                if graphed:
                    graph.replay()
                    logits_host.copy_(out, non_blocking=False)
                else:
                    logits_host.copy_(m.step(tok_buf, pos_buf), non_blocking=False)
            return (time.perf_counter() - t0) / dec * 1e3

        res = {}
        for graphed in (True, False):
            ms = [decode(graphed) for _ in range(a.reps)]
            res[graphed] = statistics.median(ms)
        decode(True)
        last = logits_host.clone()

        class TorchNS:
            sqrt, exp, tanh, stack = torch.sqrt, torch.exp, torch.tanh, torch.stack
            cat = staticmethod(lambda xs, axis: torch.cat(xs, axis))
            rowmean = staticmethod(lambda x: x.mean(-1, keepdim=True))
            rowsum = staticmethod(lambda x: x.sum(-1, keepdim=True))
            rowmax = staticmethod(lambda x: x.amax(-1, keepdim=True))

        T = lambda t: torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32)).to(dev)
        full = ref.forward(TorchNS, T, arch, cfg, w, toks)[-1:].cpu()
    rel = float((last - full).abs().max()) / max(1.0, float(full.abs().max()))
    ok = rel <= 1e-4
    print("torch %s anchor on %s: %s: last-step logits vs whole-sequence reference %.3g (bound 1e-4) -> %s"
          % (torch.__version__, torch.cuda.get_device_name(0), a.model, rel, "ok" if ok else "FAIL"))
    print("  anchor decode (16-token prompt, %d tokens, median of %d): CUDA graph %.4f ms/token, eager %.4f ms/token"
          % (dec, a.reps, res[True], res[False]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
