#!/usr/bin/env bash
# Builds kiln and runs every test that needs no GPU (ctest label gpu is excluded).
#
#   bash scripts/test.sh              # the build in build/ (Release, gcc)
#   bash scripts/test.sh --sanitize   # clang-22 with AddressSanitizer and
#       UndefinedBehaviorSanitizer in build-sanitize/: the same CPU tests, then
#       every libFuzzer target for KILN_FUZZ_SECONDS (20) from its seed corpus.
#       At -O1, as sanitizer builds usually are, and without the fp16/bf16
#       GPT-2 models (they run on GPUs only; the CPU runs fp32). CI runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" != "--sanitize" ]]; then
  bash scripts/build.sh
  cd build
  ctest --output-on-failure -j "${KILN_JOBS:-2}" -LE gpu
  exit 0
fi
bash scripts/setup.sh
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DKILN_FUZZ=ON -DKILN_BUILD_BENCH=OFF -DKILN_GPT2_HALF_MODELS=OFF -DKILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-20}"
cmake --build build-sanitize -j "${KILN_JOBS:-2}"
cd build-sanitize
# use_sigaltstack=0: LLVM installs its own alternate signal stacks on threads, and
# ASan then fails to unmap its own when such a thread ends.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons the unused part of a
# slab when compiled with ASan (kiln's code) but not when not (the Debian
# libMLIR), and MLIR's uniquer allocates from one slab through both, so its
# poisoning reports memory that is in use.
export ASAN_OPTIONS="abort_on_error=1:use_sigaltstack=0:allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
ctest --output-on-failure -j "${KILN_JOBS:-2}" -LE "gpu|fuzz"
ctest --output-on-failure -j "${KILN_JOBS:-2}" -L fuzz
