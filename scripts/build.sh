#!/usr/bin/env bash
# Configures and builds kiln (Release) into build/; installs dependencies first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${KILN_JOBS:-2}"
