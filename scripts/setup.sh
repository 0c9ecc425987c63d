#!/usr/bin/env bash
# Installs kiln's build dependencies on Debian 12 (idempotent; skips what is present).
set -euo pipefail

need=()
pkgs=(llvm-22-dev libmlir-22-dev mlir-22-tools libboost-dev doctest-dev libbenchmark-dev
      cmake ninja-build ccache g++ zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "[setup] installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "[setup] dependencies present"
