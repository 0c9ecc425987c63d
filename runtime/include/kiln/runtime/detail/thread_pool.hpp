//===- thread_pool.hpp - the host threads kiln fans work out to -----------===//
//
// One LLVM thread pool per process, as wide as the machine, for every
// fan-out on the host: the programs of a CPU launch, the autotuner's
// compilations, weight conversion. Threads start once instead of on every
// launch, and waiting on a task group from inside a pool thread runs that
// group's tasks rather than blocking, so fan-outs may nest.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/ThreadPool.h"

#include <cstdint>

namespace kiln::detail {

/// The process-wide pool (created on first use).
llvm::ThreadPoolInterface &thread_pool();

/// Calls fn(i) for i in [0, n) on the pool and the calling thread; returns
/// when all calls have returned. `fn` must not throw.
template <class Fn> void parallel_for_each(unsigned n, Fn &&fn) {
  if (n == 0)
    return;
  llvm::ThreadPoolTaskGroup group(thread_pool());
  for (unsigned i = 1; i < n; ++i)
    group.async([&fn, i] { fn(i); });
  fn(0u);
  group.wait();
}

/// How many tasks a fan-out should use: one per pool thread.
unsigned pool_width();

} // namespace kiln::detail
