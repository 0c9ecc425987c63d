#!/usr/bin/env python3
"""PyTorch baselines for kiln's microbenchmarks, on the same GPU in the same run.

Prints JSON: device-to-device copy bandwidth, and torch eager / torch.compile
timings for the shapes of bench/kiln_bench/, plus cuBLAS (torch.matmul).
"""
import json
import torch

def time_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]

out = {"device": torch.cuda.get_device_name()}
h = torch.float16
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
out["copy_GBps"] = 2 * a.numel() / (time_ms(lambda: b.copy_(a)) / 1e3) / 1e9

def both(name, fn, nbytes=0, flops=0):
    comp = torch.compile(fn)
    for label, f in (("eager", fn), ("compile", comp)):
        ms = time_ms(f)
        rec = {"ms": ms}
        if nbytes: rec["GBps"] = nbytes / (ms / 1e3) / 1e9
        if flops: rec["TFLOPs"] = flops / (ms / 1e3) / 1e12
        out[f"{name}/{label}"] = rec

for rows, cols in ((8192, 4096), (4096, 50257), (32768, 1024)):
    x = torch.randn(rows, cols, dtype=h, device="cuda")
    both(f"softmax/{rows}x{cols}", lambda x=x: torch.softmax(x, -1), 2 * x.numel() * 2)
for rows, n in ((8192, 768), (32768, 4096)):
    x = torch.randn(rows, n, dtype=h, device="cuda")
    w = torch.randn(n, dtype=h, device="cuda"); bb = torch.randn(n, dtype=h, device="cuda")
    both(f"layernorm/{rows}x{n}", lambda x=x, w=w, bb=bb: torch.nn.functional.layer_norm(x, (n,), w, bb, 1e-5), 2 * x.numel() * 2)
for M, K, N in ((4096, 4096, 4096), (8192, 768, 3072)):
    A = torch.randn(M, K, dtype=h, device="cuda"); B = torch.randn(K, N, dtype=h, device="cuda")
    bias = torch.randn(N, dtype=h, device="cuda")
    both(f"matmul/{M}x{K}x{N}", lambda A=A, B=B: A @ B, flops=2 * M * N * K)
    both(f"matmul_bias_gelu/{M}x{K}x{N}", lambda A=A, B=B, bias=bias: torch.nn.functional.gelu(A @ B + bias, approximate="tanh"), flops=2 * M * N * K)
# Decode-like MLP: 32 distinct weight copies (together larger than L2), back to back.
for M in (1, 64):
    K, N, copies = 768, 3072, 32
    x = torch.randn(M, K, dtype=h, device="cuda")
    ws = [torch.randn(K, N, dtype=h, device="cuda") for _ in range(copies)]
    bs = [torch.randn(N, dtype=h, device="cuda") for _ in range(copies)]
    def mlp(x=x, ws=ws, bs=bs):
        for w, b in zip(ws, bs):
            torch.nn.functional.gelu(x @ w + b, approximate="tanh")
    ms = time_ms(mlp) / copies
    out[f"decode_mlp/{M}x{K}x{N}/eager"] = {"ms": ms, "GBps": K * N * 2 / (ms / 1e3) / 1e9}
print(json.dumps(out, indent=1))
