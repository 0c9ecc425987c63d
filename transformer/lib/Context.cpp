//===- Context.cpp - compiling the kernels blocks asked for ----------------===//
#include "kiln/nn/context.hpp"

#include "Parallel.h"

#include <algorithm>
#include <exception>

namespace kiln::nn {

void Context::compile() {
  std::vector<std::function<void()>> jobs;
  jobs.swap(pending_);
  // Independent compilations, one per core (cache hits take about 1 ms each).
  std::vector<std::exception_ptr> errors(jobs.size());
  gpt2::parallelFor(
      int64_t(jobs.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          try {
            jobs[std::size_t(i)]();
          } catch (...) {
            errors[std::size_t(i)] = std::current_exception();
          }
        }
      },
      1);
  std::sort(records_.begin(), records_.end(),
            [](const KernelRecord &a, const KernelRecord &b) { return a.role < b.role; });
  for (auto &e : errors)
    if (e)
      std::rethrow_exception(e);
}

double Context::compile_seconds() const {
  double s = 0;
  for (const KernelRecord &r : records_)
    s += r.compile_seconds;
  return s;
}

} // namespace kiln::nn
