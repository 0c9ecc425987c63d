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
