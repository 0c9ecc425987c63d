//===- Context.cpp - compiling the kernels blocks asked for ----------------===//
#include "kiln/nn/context.hpp"

#include "Parallel.h"

#include <algorithm>
#include <cstdlib>
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

std::shared_ptr<const Tuned> Context::tuned(const std::string &key, const std::string &role,
                                            const std::function<std::optional<Tuned>()> &tune) {
  auto found = tuned_.find(key);
  if (found != tuned_.end())
    return found->second;
  std::optional<Tuned> result = tune();
  if (!result) {
    tuned_.emplace(key, nullptr);
    return nullptr;
  }
  auto t = std::make_shared<const Tuned>(std::move(*result));
  tuningSeconds_ += t->tuning_seconds();
  const std::string &label = t->label(); // "MatmulBias_f16_64_128_64/w4/s3/ws"
  auto option = [&](char c) {
    std::size_t at = label.find(std::string("/") + c);
    return at == std::string::npos ? 0 : std::atoi(label.c_str() + at + 2);
  };
  records_.push_back({label, role, t->tuning_seconds(), t->from_disk(), option('w'), option('s'),
                      t->from_disk() ? "tuning cache" : "tuned"});
  std::stable_sort(records_.begin(), records_.end(),
                   [](const KernelRecord &a, const KernelRecord &b) { return a.role < b.role; });
  tuned_.emplace(key, t);
  return t;
}

double Context::compile_seconds() const {
  double s = 0;
  for (const KernelRecord &r : records_)
    s += r.compile_seconds;
  return s;
}

} // namespace kiln::nn
