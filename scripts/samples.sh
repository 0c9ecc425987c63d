#!/usr/bin/env bash
# The main job: builds kiln and runs the numbered lessons, printing their
# results and the IR they produce (kiln IR, then LLVM IR for lesson 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
for lesson in build/bin/0[0-9]_*; do
  echo "################ ${lesson##*/} ################"
  case "${lesson##*/}" in
    01_*) "$lesson" --ir=kiln,llvm ;;
    04_*) "$lesson" --ir=lowered,ptx ;;
    *) "$lesson" --ir=kiln ;;
  esac
done
# GPT-2 made of the lessons' kind of kernels: seeded weights (a small model,
# the real GPT-2 tokenizer), on the GPU when there is one, else the CPU.
echo "################ kiln-gpt2 ################"
build/bin/kiln-gpt2 --random tiny --prompt "The kiln fired the clay" --max-new-tokens 16 --explain
