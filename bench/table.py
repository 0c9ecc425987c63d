#!/usr/bin/env python3
"""Merge kiln_bench JSON and baselines.py JSON (one run) into a markdown table of ratios.

usage: table.py kiln_bench.json baselines.json > table.md
"""
import json, re, sys

kiln = json.load(open(sys.argv[1]))
base = json.load(open(sys.argv[2]))
copy = base["copy_GBps"]

best = {}  # (op, shape) -> (metric, value, name)
for b in kiln["benchmarks"]:
    if b.get("error_occurred"):
        continue
    name = b["name"]
    args = re.findall(r"/(\d+)", name.split("/manual_time")[0])
    if name.startswith("BM_softmax"):
        op, shape, metric = "softmax", f"{args[0]}x{args[1]}", "GB/s"
    elif name.startswith("BM_layernorm"):
        op, shape, metric = "layernorm", f"{args[0]}x{args[1]}", "GB/s"
    elif name.startswith("BM_matmul<true>"):
        op, shape, metric = "matmul_bias_gelu", "x".join(args[:3]), "TFLOP/s"
    elif name.startswith("BM_matmul<false>"):
        op, shape, metric = "matmul", "x".join(args[:3]), "TFLOP/s"
    elif name.startswith("BM_cublas<false>"):
        op, shape, metric = "cublas_matmul", "x".join(args[:3]), "TFLOP/s"
    elif name.startswith("BM_cublas<true>"):
        op, shape, metric = "cublaslt_bias_gelu", "x".join(args[:3]), "TFLOP/s"
    elif name.startswith("BM_decode_mlp"):
        op, shape, metric = "decode_mlp", "x".join(args[:3]), "GB/s"
    else:
        continue
    v = b.get(metric, 0)
    key = (op, shape)
    if key not in best or v > best[key][1]:
        best[key] = (metric, v, b.get("label", "") or name.split("<", 1)[-1].split(">")[0], b["real_time"], b["time_unit"])

print(f"Device: {base['device']}; device-to-device copy: {copy:.0f} GB/s (torch, same run).\n")
cublas = {"matmul": "cublas_matmul", "matmul_bias_gelu": "cublaslt_bias_gelu"}
print("| kernel | shape | kiln | kiln config | torch eager | torch.compile | kiln / eager | kiln vs target |")
print("|---|---|---|---|---|---|---|---|")
for (op, shape), (metric, v, label, t, unit) in sorted(best.items()):
    bkey = "GBps" if metric == "GB/s" else "TFLOPs"
    e = base.get(f"{op}/{shape}/eager", {}).get(bkey)
    c = base.get(f"{op}/{shape}/compile", {}).get(bkey)
    if metric == "GB/s" and op != "decode_mlp":
        target = f"{v / copy:.0%} of copy (target 85%)"
    elif op == "decode_mlp":
        target = f"{v / copy:.0%} of copy on weights (target 60%)"
    elif op in cublas:
        ref = best.get((cublas[op], shape))
        target = f"{v / ref[1]:.1%} of cuBLAS{'Lt bias+gelu' if 'bias' in op else ''} in-process (target 50%)" if ref else "-"
    else:
        target = "baseline"
    fmt = lambda x: f"{x:.1f}" if x is not None else "-"
    ratio = f"{v / e:.2f}x" if e else "-"
    print(f"| {op} | {shape} | {v:.1f} {metric} | {label} | {fmt(e)} | {fmt(c)} | {ratio} | {target} |")
