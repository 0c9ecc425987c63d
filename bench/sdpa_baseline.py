#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (causal, fp16) on the shapes of
kiln_bench's BM_attention_prefill, counted the same way: the causal half of
Q K^T and P V, 2 * 2 * B * H * S * S * D / 2 FLOP. Both PyTorch's own choice
of backend (cuDNN on Hopper where it is available) and the flash backend."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


rows = []
for B, H, S, D in [(8, 12, 1024, 64), (4, 16, 4096, 128)]:
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    flops = 2 * 2 * B * H * S * S * D / 2
    row = {"B": B, "H": H, "S": S, "D": D}
    ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    row["default_tflops"] = flops / (ms * 1e-3) / 1e12
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    row["flash_tflops"] = flops / (ms * 1e-3) / 1e12
    rows.append(row)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "sdpa_causal_fp16": rows},
          sys.stdout, indent=1)
print()
