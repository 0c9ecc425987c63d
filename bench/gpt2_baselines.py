#!/usr/bin/env python3
"""PyTorch baselines for kiln-gpt2-bench: GPT-2 written the way gpt-fast writes
it, on the same seeded weights as kiln (tests/gpt2/make_golden.py).

  python3 bench/gpt2_baselines.py OUT.jsonl [--modes eager,compile,reduce-overhead]
      [--batches 1,8] [--prompts 16,64,256] [--new 128,512] [--deadline SECONDS]

- a static KV cache per layer, held in module buffers and sized to the prompt
  plus the new tokens (gpt-fast's max_seq_length), updated in place with
  index_put; attention through F.scaled_dot_product_attention with the
  causal-mask row of each position;
- prefill and decode are separate functions, compiled separately: in
  reduce-overhead mode prefill under torch.compile(fullgraph=True,
  dynamic=True) and the decode step under torch.compile(mode="reduce-overhead",
  fullgraph=True): one CUDA graph per step; "compile" compiles both with the
  default mode; "eager" compiles nothing;
- the position is a device tensor bumped in place (input_pos += 1), the next
  token is the argmax inside the compiled step.

Each (batch, prompt, new_tokens) generates twice: the first call (which
includes compilation and graph capture for that shape) and the timed one.
torch._dynamo's counters say how many graphs each call compiled (the timed
call must compile none) and whether inductor skipped CUDA graphs.

One JSON object per line: mode, batch, prompt, new_tokens, ttft_ms,
ms_per_token, tokens_per_s, generate_ms, first_call_s, graphs_first_call,
graphs_timed, cudagraph_skips.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpt2"))
from make_golden import random_weights  # noqa: E402

# GPT-2's sizes (layers, heads, width); --size picks one.
SIZES = {"124M": (12, 12, 768), "355M": (24, 16, 1024), "774M": (36, 20, 1280), "1.5B": (48, 25, 1600)}
L, H, C = SIZES["124M"]
V, T_CTX = 50257, 1024
D = C // H


def build(dtype=torch.float16):
    return {k: torch.from_numpy(v).to("cuda", dtype) for k, v in random_weights(L, H, C, V, T_CTX, 1).items()}


class KVCache(torch.nn.Module):
    def __init__(self, batch, max_seq, dtype):
        super().__init__()
        self.register_buffer("k", torch.zeros(batch, H, max_seq, D, device="cuda", dtype=dtype))
        self.register_buffer("v", torch.zeros(batch, H, max_seq, D, device="cuda", dtype=dtype))

    def update(self, input_pos, k, v):
        self.k[:, :, input_pos] = k
        self.v[:, :, input_pos] = v
        return self.k, self.v


class Gpt2(torch.nn.Module):
    def __init__(self, w, batch, max_seq, dtype=torch.float16):
        super().__init__()
        self.w = w
        self.caches = torch.nn.ModuleList(KVCache(batch, max_seq, dtype) for _ in range(L))
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool, device="cuda")))

    def forward(self, tokens, input_pos):
        """tokens [B, S], input_pos [S]: the next token of each sequence, [B, 1]."""
        w = self.w
        B, S = tokens.shape
        x = w["wte.weight"][tokens] + w["wpe.weight"][input_pos][None]
        mask = self.causal[None, None, input_pos]  # [1, 1, S, max_seq]
        for i in range(L):
            p = f"h.{i}."
            h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = qkv.view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)  # each [B, H, S, D]
            kc, vc = self.caches[i].update(input_pos, k, v)
            att = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
            att = att.transpose(1, 2).reshape(B, S, C)
            x = x + att @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
            f = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
            x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        h = F.layer_norm(x[:, -1], (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
        return torch.argmax(h @ w["wte.weight"].t(), dim=-1, keepdim=True)


def prefill(model, tokens, input_pos):
    return model(tokens, input_pos)


def decode_one_token(model, token, input_pos):
    return model(token, input_pos)


def graphs():
    return counters["stats"]["unique_graphs"]


def run(mode, w, args, out, deadline):
    torch._dynamo.reset()
    if mode == "compile":
        prefill_fn = torch.compile(prefill, fullgraph=True, dynamic=True)
        decode_fn = torch.compile(decode_one_token, fullgraph=True)
    elif mode == "reduce-overhead":
        prefill_fn = torch.compile(prefill, fullgraph=True, dynamic=True)
        decode_fn = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
    else:
        prefill_fn, decode_fn = prefill, decode_one_token
    for batch in args.batches:
        for prompt in args.prompts:
            for new in args.new:
                if time.time() > deadline:
                    return
                model = Gpt2(w, batch, prompt + new)
                tokens = torch.tensor([[(t * 7919 + b * 104729) % 50000 for t in range(prompt)] for b in range(batch)],
                                      device="cuda")

                def generate():
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    nxt = prefill_fn(model, tokens, torch.arange(prompt, device="cuda"))
                    torch.cuda.synchronize()
                    t_first = time.perf_counter()
                    input_pos = torch.tensor([prompt], device="cuda")
                    for _ in range(new - 1):
                        nxt = decode_fn(model, nxt.clone(), input_pos)
                        input_pos += 1
                    torch.cuda.synchronize()
                    return t0, t_first, time.perf_counter()

                g0 = graphs()
                t0, _, t_end = generate()
                first_call = t_end - t0
                g1 = graphs()
                t0, t_first, t_end = generate()
                g2 = graphs()
                ms = (t_end - t_first) / (new - 1) * 1e3
                rec = {"mode": mode, "batch": batch, "prompt": prompt, "new_tokens": new,
                       "ttft_ms": round((t_first - t0) * 1e3, 3), "ms_per_token": round(ms, 4),
                       "tokens_per_s": round(batch * 1e3 / ms, 1),
                       "generate_ms": round((t_end - t0) * 1e3, 3), "first_call_s": round(first_call, 2),
                       "graphs_first_call": g1 - g0, "graphs_timed": g2 - g1,
                       "cudagraph_skips": counters["inductor"]["cudagraph_skips"]}
                out.write(json.dumps(rec) + "\n")
                out.flush()


def ints(s):
    return [int(x) for x in s.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--modes", default="eager,compile,reduce-overhead")
    ap.add_argument("--batches", type=ints, default=[1, 8])
    ap.add_argument("--prompts", type=ints, default=[16, 64, 256])
    ap.add_argument("--new", type=ints, default=[128, 512])
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds after which no new row starts")
    ap.add_argument("--size", default="124M", choices=sorted(SIZES))
    args = ap.parse_args()
    global L, H, C, D
    L, H, C = SIZES[args.size]
    D = C // H
    deadline = time.time() + args.deadline
    torch._dynamo.config.cache_size_limit = 64
    # Every new cache length gets its own static graph, as a gpt-fast run has.
    torch._dynamo.config.automatic_dynamic_shapes = False
    w = build()
    with open(args.out, "w") as out:
        for mode in args.modes.split(","):
            if mode not in ("eager", "compile", "reduce-overhead"):
                sys.exit(f"gpt2_baselines.py: unknown mode '{mode}' (eager, compile or reduce-overhead)")
            run(mode, w, args, out, deadline)
        out.write(json.dumps({"mode": "info", "size": args.size, "torch": torch.__version__,
                              "device": torch.cuda.get_device_name()}) + "\n")


if __name__ == "__main__":
    main()
