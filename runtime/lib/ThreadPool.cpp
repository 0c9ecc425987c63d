//===- ThreadPool.cpp - the host threads kiln fans work out to ------------===//
#include "kiln/runtime/detail/thread_pool.hpp"

#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"

#include <algorithm>

namespace kiln::detail {

namespace {
/// The process-wide pool (created on first use).
llvm::ThreadPoolInterface &thread_pool() {
  static llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
  return pool;
}
} // namespace

void parallel_for_each(unsigned n, const std::function<void(unsigned)> &fn) {
  if (n == 0)
    return;
  llvm::ThreadPoolTaskGroup group(thread_pool());
  for (unsigned i = 1; i < n; ++i)
    group.async([&fn, i] { fn(i); });
  fn(0u);
  group.wait();
}

unsigned pool_width() { return std::max(1u, thread_pool().getMaxConcurrency()); }

} // namespace kiln::detail
