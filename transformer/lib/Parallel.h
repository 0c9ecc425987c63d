//===- Parallel.h - split a loop over the host's cores (internal) ---------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace kiln::gpt2 {

/// Calls fn(begin, end) on disjoint chunks covering [0, n), in parallel.
template <class Fn> void parallelFor(int64_t n, Fn fn, int64_t minChunk = 1 << 16) {
  int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n / minChunk));
  if (workers <= 1) {
    fn(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  int64_t chunk = (n + workers - 1) / workers;
  for (int64_t w = 0; w < workers; ++w) {
    int64_t begin = w * chunk, end = std::min(n, begin + chunk);
    if (begin < end)
      pool.emplace_back([=, &fn] { fn(begin, end); });
  }
  for (std::thread &t : pool)
    t.join();
}

} // namespace kiln::gpt2
