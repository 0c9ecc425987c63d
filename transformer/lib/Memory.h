//===- Memory.h - checking sizes against the memory there is (internal) ---===//
//
// Sizes read from files and flags are checked before anything is allocated,
// so that a hostile header or `--batch 100000` ends with one message naming
// what did not fit rather than std::bad_alloc or the OOM killer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace kiln::gpt2 {

/// Bytes of host memory this process can still allocate: the smaller of the
/// system's available memory (MemAvailable) and what the address-space
/// limit (`ulimit -v`) leaves above the current mapping.
uint64_t hostMemoryAvailable();

/// Throws kiln::Error("<what> needs N GiB of host memory; M GiB available")
/// when `bytes` exceed hostMemoryAvailable().
void requireHostMemory(uint64_t bytes, const std::string &what);

/// The same against the GPU's free memory, as the driver reports it.
void requireDeviceMemory(uint64_t bytes, const std::string &what);

/// a * b, or UINT64_MAX when that overflows (sizes that never fit).
inline uint64_t mulSat(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline uint64_t addSat(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

} // namespace kiln::gpt2
