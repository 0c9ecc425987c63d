//===- Memory.cpp - checking sizes against the memory there is ------------===//
#include "Memory.h"

#include "kiln/runtime/cuda.hpp"
#include "kiln/core/error.hpp"

#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

namespace kiln::gpt2 {
namespace {

std::string gib(uint64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << double(bytes) / double(1ull << 30) << " GiB";
  return s.str();
}

/// MemAvailable from /proc/meminfo, in bytes; UINT64_MAX where unknown.
uint64_t systemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return mulSat(kib, 1024);
  return UINT64_MAX;
}

/// What RLIMIT_AS leaves above the current mapping; UINT64_MAX if unlimited.
uint64_t addressSpaceLeft() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  uint64_t used = mulSat(pages, uint64_t(sysconf(_SC_PAGESIZE)));
  return lim.rlim_cur > used ? lim.rlim_cur - used : 0;
}

} // namespace

uint64_t hostMemoryAvailable() { return std::min(systemAvailable(), addressSpaceLeft()); }

void requireHostMemory(uint64_t bytes, const std::string &what) {
  uint64_t have = hostMemoryAvailable();
  if (bytes > have)
    throw Error(what + " needs " + (bytes == UINT64_MAX ? "more than 2^64 bytes" : gib(bytes)) +
                " of host memory; " + gib(have) + " available");
}

void requireDeviceMemory(uint64_t bytes, const std::string &what) {
  uint64_t have = cuda::memory_free();
  if (bytes > have)
    throw Error(what + " needs " + (bytes == UINT64_MAX ? "more than 2^64 bytes" : gib(bytes)) +
                " of GPU memory; " + gib(have) + " free on " + cuda::device_name());
}

} // namespace kiln::gpt2
