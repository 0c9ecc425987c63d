#!/usr/bin/env python3
"""PyTorch baselines for kiln-gpt2-bench: GPT-2 with a static KV cache, run
eager, with torch.compile (default) and torch.compile(mode="reduce-overhead",
fullgraph=True), on the same seeded weights (tests/gpt2/make_golden.py).

  python3 bench/gpt2_baselines.py OUT.jsonl [MODE...] [--deadline SECONDS]

One JSON object per line: mode, batch, prompt, new_tokens, ttft_ms,
ms_per_token, tokens_per_s, first_call_s (includes compilation).
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpt2"))
from make_golden import random_weights  # noqa: E402

L, H, C, V, T = 12, 12, 768, 50257, 1024
D = C // H


def build(dtype=torch.float16):
    w = {k: torch.from_numpy(v).to("cuda", dtype) for k, v in random_weights(L, H, C, V, T, 1).items()}
    return w


def block_forward(w, x, positions, kc, vc):
    """x: [B, S, C]; positions: [S] (int64); caches [L, B, H, T, D]."""
    B, S, _ = x.shape
    key_pos = torch.arange(T, device=x.device)
    mask = key_pos[None, :] <= positions[:, None]  # [S, T]
    for i in range(L):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)  # each [B, H, S, D]
        kc[i].index_copy_(2, positions, k)
        vc[i].index_copy_(2, positions, v)
        att = F.scaled_dot_product_attention(q, kc[i], vc[i], attn_mask=mask)
        att = att.transpose(1, 2).reshape(B, S, C)
        x = x + att @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        f = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return x


class Gpt2(torch.nn.Module):
    """The caches are buffers of the module, as in gpt-fast, so that
    torch.compile(mode="reduce-overhead") can keep its CUDA graphs while the
    step updates them in place."""

    def __init__(self, w, batch):
        super().__init__()
        self.w = w
        self.register_buffer("kc", torch.zeros(L, batch, H, T, D, device="cuda", dtype=torch.float16))
        self.register_buffer("vc", torch.zeros(L, batch, H, T, D, device="cuda", dtype=torch.float16))

    def forward(self, tokens, positions):
        w = self.w
        x = w["wte.weight"][tokens] + w["wpe.weight"][positions][None]
        x = block_forward(w, x, positions, self.kc, self.vc)
        h = F.layer_norm(x[:, -1], (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
        return torch.argmax(h @ w["wte.weight"].t(), dim=-1)


def run(mode, w, out, deadline):
    for batch in (1, 8):
        model = Gpt2(w, batch)
        if mode == "compile":
            prefill_fn = decode_fn = torch.compile(model)
        elif mode == "reduce-overhead":
            prefill_fn = torch.compile(model, fullgraph=True)
            decode_fn = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        else:
            prefill_fn = decode_fn = model
        for prompt in (16, 64, 256):
            for new in (128, 512):
                if time.time() > deadline:
                    return
                tokens = torch.tensor([[(t * 7919 + b * 104729) % 50000 for t in range(prompt)] for b in range(batch)],
                                      device="cuda")

                def generate():
                    positions = torch.arange(prompt, device="cuda")
                    nxt = prefill_fn(tokens, positions)
                    torch.cuda.synchronize()
                    t_first = time.perf_counter()
                    for s in range(new - 1):
                        pos = torch.tensor([prompt + s], device="cuda")
                        nxt = decode_fn(nxt[:, None].clone(), pos)
                    torch.cuda.synchronize()
                    return t_first

                t0 = time.perf_counter()
                generate()
                first_call = time.perf_counter() - t0
                t0 = time.perf_counter()
                t_first = generate()
                t_end = time.perf_counter()
                ms = (t_end - t_first) / (new - 1) * 1e3
                rec = {"mode": mode, "batch": batch, "prompt": prompt, "new_tokens": new,
                       "ttft_ms": round((t_first - t0) * 1e3, 3), "ms_per_token": round(ms, 4),
                       "tokens_per_s": round(batch * 1e3 / ms, 1), "first_call_s": round(first_call, 2)}
                out.write(json.dumps(rec) + "\n")
                out.flush()


def main():
    path = sys.argv[1]
    budget = float(sys.argv[sys.argv.index("--deadline") + 1]) if "--deadline" in sys.argv else 1e9
    deadline = time.time() + budget
    torch._dynamo.config.cache_size_limit = 64
    w = build()
    with open(path, "w") as out:
        modes = [m for m in sys.argv[2:] if m in ("eager", "reduce-overhead", "compile")]
        for mode in modes or ("eager", "reduce-overhead", "compile"):
            run(mode, w, out, deadline)
        out.write(json.dumps({"mode": "info", "torch": torch.__version__,
                              "device": torch.cuda.get_device_name()}) + "\n")


if __name__ == "__main__":
    main()
