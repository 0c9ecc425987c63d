//===- Parallel.h - split a loop over the host's cores (internal) ---------===//
#pragma once

#include "kiln/runtime/detail/thread_pool.hpp"

#include <algorithm>
#include <cstdint>

namespace kiln::gpt2 {

/// Calls fn(begin, end) on disjoint chunks covering [0, n), on kiln's
/// thread pool; chunks hold at least `minChunk` iterations.
template <class Fn> void parallelFor(int64_t n, Fn fn, int64_t minChunk = 1 << 16) {
  int64_t workers = std::max<int64_t>(1, std::min<int64_t>(detail::pool_width(), n / minChunk));
  int64_t chunk = (n + workers - 1) / workers;
  detail::parallel_for_each(unsigned(workers), [&](unsigned w) {
    int64_t begin = int64_t(w) * chunk, end = std::min(n, begin + chunk);
    if (begin < end)
      fn(begin, end);
  });
}

} // namespace kiln::gpt2
