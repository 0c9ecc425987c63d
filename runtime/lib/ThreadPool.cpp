//===- ThreadPool.cpp - the host threads kiln fans work out to ------------===//
#include "kiln/runtime/detail/thread_pool.hpp"

#include "llvm/Support/Threading.h"

namespace kiln::detail {

llvm::ThreadPoolInterface &thread_pool() {
  static llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
  return pool;
}

unsigned pool_width() { return std::max(1u, thread_pool().getMaxConcurrency()); }

} // namespace kiln::detail
