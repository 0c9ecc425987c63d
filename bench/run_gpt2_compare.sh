#!/usr/bin/env bash
# GPT-2 124M with and without compilation, kiln's modes next to PyTorch's, in
# one call on a machine with a GPU (kiln-gpt2-bench on the PATH, PyTorch for
# the baselines):
#   bash bench/run_gpt2_compare.sh OUTDIR
# writes OUTDIR/kiln_modes.json, torch.jsonl, compare.md and, where
# matplotlib is installed, compare.png (else run bench/gpt2_compare.py with
# --png where it is).
set -euo pipefail
out=${1:-gpt2-compare}
here=$(dirname "$0")
mkdir -p "$out"
kiln-gpt2-bench --compare --cold > "$out/kiln_modes.json"
python3 "$here/gpt2_baselines.py" "$out/torch.jsonl" --batches 1 --prompts 16,64,256 --new 128 \
  2> "$out/torch.log"
png=()
python3 -c "import matplotlib" 2> /dev/null && png=(--png "$out/compare.png")
python3 "$here/gpt2_compare.py" "$out/kiln_modes.json" "$out/torch.jsonl" "${png[@]}" > "$out/compare.md"
cat "$out/compare.md"
