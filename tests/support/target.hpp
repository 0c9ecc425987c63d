//===- target.hpp - the target a test binary runs its kernels on ----------===//
//
// The numeric and GPT-2 tests build twice: for the host, and with
// KILN_TEST_GPU for the GPU of the machine that runs them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/runtime/cuda.hpp"

namespace kiln::test {

#ifdef KILN_TEST_GPU
inline constexpr bool kGpu = true;
#else
inline constexpr bool kGpu = false;
#endif

/// The target under test (the GPU's architecture is read once).
inline const Target &target() {
  static const Target t = kGpu ? Target::cuda(cuda::device_arch()) : Target::cpu();
  return t;
}

} // namespace kiln::test
