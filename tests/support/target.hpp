//===- target.hpp - the target a test binary runs its kernels on ----------===//
//
// The numeric and GPT-2 tests are compiled once and linked twice: with the
// host's main (tests/support/main.cpp) and with the GPU's (the same file built
// with KILN_TEST_GPU), which runs them on the GPU of the machine. Cases for
// one side only sit in the test suite "cpu-only" or "gpu-only"; the other
// side's main leaves that suite out.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/runtime/cuda.hpp"

namespace kiln::test {

/// Whether this binary runs its kernels on the GPU (defined by its main).
bool on_gpu();

/// The target under test (the GPU's architecture is read once).
inline const Target &target() {
  static const Target t = on_gpu() ? Target::cuda(cuda::device_arch()) : Target::cpu();
  return t;
}

} // namespace kiln::test
