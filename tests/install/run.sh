#!/usr/bin/env bash
# Installs the kiln build in BUILD_DIR into a temporary prefix, then
# configures, builds and runs the consumer project's two programs
# (tests/install/consumer) against it, as a user's project would use an
# installed kiln; the second runs only when the first passed.
#
#   run.sh BUILD_DIR CONSUMER_SOURCE_DIR GENERATOR C_COMPILER CXX_COMPILER [FLAGS]
#
# The consumer is built with kiln's generator and compilers, and FLAGS go to its compile
# and link lines: a sanitized kiln's static libraries need the same
# sanitizer runtimes in the program. (The C compiler is for the checks that
# LLVM's package configuration runs.)
set -euo pipefail
build=$1 consumer=$2 generator=$3 cc=$4 cxx=$5 flags=${6:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" ||
  { cat "$tmp/install.log"; exit 1; }
cmake -S "$consumer" -B "$tmp/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
cmake --build "$tmp/build"
"$tmp/build/kiln_consumer"
"$tmp/build/kiln_consumer_blocks"
