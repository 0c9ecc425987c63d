#!/usr/bin/env bash
# The decode measurements (one or two calls) on a machine with a GPU (kiln_bench and
# kiln-gpt2-bench on the PATH, PyTorch for the baselines): the row kernels
# against the copy rate and PyTorch eager, GPT-2 124M fp16 decode steps by
# batch next to the gpt-fast-style PyTorch model (reduce-overhead), and the
# per-kernel times of one step at batches 1 and 8; kiln with and without the
# decode products' L2 prefetch of the next product's weight (--prefetch).
#   bash bench/run_decode.sh OUTDIR [BATCHES] [PART]   (BATCHES: 1,2,4,8,16;
#       PART: rows (the kernels), model (GPT-2) or all, the default; the two
#       parts fit one 10-minute call each)
# writes OUTDIR/{rows.json,baselines.json,rows.md,few_rows.json,kiln.json,kiln-prefetch.json,
# torch.jsonl,profile.json,profile-prefetch.json,decode.md} and prints rows.md
# and decode.md.
set -euo pipefail
out=${1:-decode}
batches=${2:-1,2,4,8,16}
part=${3:-all}
here=$(dirname "$0")
case "$part" in rows | model | all) ;; *) echo "run_decode.sh: PART is rows, model or all, not '$part'" >&2; exit 2 ;; esac
mkdir -p "$out"
if [[ "$part" != model ]]; then
kiln_bench --benchmark_filter='BM_softmax|BM_layernorm' --benchmark_format=json > "$out/rows.json" \
  2> "$out/rows.log"
python3 "$here/baselines.py" > "$out/baselines.json" 2> "$out/baselines.log"
python3 "$here/table.py" "$out/rows.json" "$out/baselines.json" > "$out/rows.md"
# Few-row products over 32 distinct weights, without and with the L2
# prefetch of the next one's weight (the fourth argument).
kiln_bench --benchmark_filter='BM_few_rows' --benchmark_format=json > "$out/few_rows.json" \
  2> "$out/few_rows.log"
cat "$out/rows.md"
fi
[[ "$part" == rows ]] && exit 0
kiln-gpt2-bench --mode max-autotune --batches "$batches" --prompts 64 --new 128 > "$out/kiln.json" \
  2> "$out/kiln.log"
kiln-gpt2-bench --mode max-autotune --prefetch 1 --batches "$batches" --prompts 64 --new 128 \
  > "$out/kiln-prefetch.json" 2> "$out/kiln-prefetch.log"
python3 "$here/gpt2_baselines.py" "$out/torch.jsonl" --modes reduce-overhead --batches "$batches" \
  --prompts 64 --new 128 --deadline 150 2> "$out/torch.log"
kiln-gpt2-bench --mode max-autotune --profile --batches 1,8 --prompts 64 > "$out/profile.json" \
  2> "$out/profile.log"
kiln-gpt2-bench --mode max-autotune --prefetch 1 --profile --batches 1 --prompts 64 \
  > "$out/profile-prefetch.json" 2> "$out/profile-prefetch.log"
python3 - "$out/kiln.json" "$out/torch.jsonl" "$out/kiln-prefetch.json" > "$out/decode.md" <<'PY'
import json, sys
kiln = json.load(open(sys.argv[1]))
ahead = {(r["batch"], r["prompt"], r["new_tokens"]): r["ms_per_token"]
         for r in json.load(open(sys.argv[3]))["runs"]}
torch = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r.get("mode") == "reduce-overhead":
        torch[(r["batch"], r["prompt"], r["new_tokens"])] = r["ms_per_token"]
print(f"GPT-2 {kiln['model']} {kiln['precision']}, {kiln['launches_per_decode_step']} launches a step "
      f"(the last batch), ms per decode step\n")
print("| batch | prompt | new | kiln | kiln, --prefetch 1 | PyTorch reduce-overhead | kiln speed-up |")
print("|---|---|---|---|---|---|---|")
for r in kiln["runs"]:
    key = (r["batch"], r["prompt"], r["new_tokens"])
    t, a = torch.get(key), ahead.get(key)
    ratio = f"{t / r['ms_per_token']:.2f}x" if t else "-"
    print(f"| {r['batch']} | {r['prompt']} | {r['new_tokens']} | {r['ms_per_token']:.3f} | "
          f"{f'{a:.3f}' if a else '-'} | {t if t else '-'} | {ratio} |")
PY
cat "$out/decode.md"
