//===- thread_pool.hpp - the host threads kiln fans work out to -----------===//
//
// One thread pool per process, as wide as the machine, for every fan-out on
// the host: the programs of a CPU launch, the autotuner's compilations,
// weight conversion. Threads start once instead of on every launch, and
// waiting on a fan-out from inside a pool thread runs its tasks rather than
// blocking, so fan-outs may nest.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>

namespace kiln::detail {

/// Calls fn(i) for i in [0, n) on the pool and the calling thread; returns
/// when all calls have returned. `fn` must not throw.
void parallel_for_each(unsigned n, const std::function<void(unsigned)> &fn);

/// How many tasks a fan-out should use: one per pool thread.
unsigned pool_width();

} // namespace kiln::detail
