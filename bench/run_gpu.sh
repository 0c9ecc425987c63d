#!/usr/bin/env bash
# On a machine with a GPU (kiln_bench on the PATH): kiln's microbenchmarks and
# the PyTorch baselines in one run, merged into one table of ratios.
#   bash bench/run_gpu.sh OUTDIR
set -euo pipefail
out=${1:-bench-out}
mkdir -p "$out"
kiln_bench --benchmark_format=json --benchmark_out="$out/kiln_bench.json" --benchmark_out_format=json \
  > "$out/kiln_bench.txt"
python3 "$(dirname "$0")/baselines.py" > "$out/baselines.json" 2> "$out/baselines.log"
python3 "$(dirname "$0")/table.py" "$out/kiln_bench.json" "$out/baselines.json" > "$out/table.md"
cat "$out/table.md"
