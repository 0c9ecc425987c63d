#!/usr/bin/env bash
# Builds kiln and runs every test that needs no GPU (ctest label gpu is excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${KILN_JOBS:-2}" -LE gpu
