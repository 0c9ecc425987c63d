#!/usr/bin/env bash
# On a machine with a GPU (kiln_bench on the PATH, PyTorch for the baseline):
# the prefill-attention benchmarks and PyTorch's SDPA on the same shapes,
# alternating RUNS times (default 2) in one call, then a table of TFLOP/s.
#   bash bench/run_attention.sh OUTDIR [RUNS]
set -euo pipefail
out=${1:?usage: run_attention.sh OUTDIR [RUNS]}
runs=${2:-2}
here=$(dirname "$0")
mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
for i in $(seq "$runs"); do
  kiln_bench --benchmark_filter=BM_attention --benchmark_format=json > "$out/attn-kiln-$i.json"
  python3 "$here/sdpa_baseline.py" > "$out/attn-sdpa-$i.json"
done
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
kiln, sdpa = {}, {}
for i in range(1, runs + 1):
    text = open(f"{out}/attn-kiln-{i}.json").read()
    for b in json.loads(text[text.index("{"):])["benchmarks"]:  # after kiln_bench's device line
        kiln.setdefault(b["name"].split("/iterations")[0], []).append(b.get("TFLOP/s", b.get("tflops", 0)))
    for r in json.load(open(f"{out}/attn-sdpa-{i}.json"))["sdpa_causal_fp16"]:
        key = f"B{r['B']} H{r['H']} S{r['S']} D{r['D']}"
        sdpa.setdefault(key, {"default": [], "flash": []})
        sdpa[key]["default"].append(r["default_tflops"])
        sdpa[key]["flash"].append(r["flash_tflops"])
span = lambda v: f"{min(v):.1f}-{max(v):.1f}"
print("| kiln benchmark | TFLOP/s |")
print("|---|---|")
for name, v in kiln.items():
    print(f"| {name} | {span(v)} |")
print()
print("| shape | SDPA (PyTorch's choice) | SDPA (flash) |")
print("|---|---|---|")
for key, v in sdpa.items():
    print(f"| {key} | {span(v['default'])} | {span(v['flash'])} |")
PY
