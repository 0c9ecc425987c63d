//===- Autotune.cpp - compile candidates in parallel, time, persist -------===//
#include "kiln/autotuner/autotune.hpp"

#include "kiln/runtime/cuda.hpp"
#include "kiln/runtime/detail/kernel_cache.hpp"
#include "kiln/runtime/detail/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

namespace fs = std::filesystem;

namespace kiln {

std::string tuning_directory() { return (fs::path(KernelCache::directory()) / "tuning").string(); }

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Median milliseconds of `fn` on the target: CUDA events with the L2 flushed
/// before every run (a run: one call, or a graph of timing.chain calls, per
/// call), or the wall clock on the CPU.
double measure(const Target &target, const TuneTiming &timing, const std::function<void()> &fn) {
  if (target.kind == Target::Kind::Cuda && timing.chain > 0) {
    cuda::Stream stream;
    cuda::StreamScope scope(stream);
    fn(); // loads the module outside the capture
    auto graph = cuda::Graph::capture(stream, [&] {
      for (int i = 0; i < timing.chain; ++i)
        fn();
    });
    return cuda::time_ms([&] { graph.replay(stream); }, /*reps=*/10, /*warmup=*/2, /*flush_l2=*/true) /
           timing.chain;
  }
  if (target.kind == Target::Kind::Cuda)
    return cuda::time_ms(fn, /*reps=*/10, /*warmup=*/2, /*flush_l2=*/true);
  fn(); // warm-up
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    auto t = std::chrono::steady_clock::now();
    fn();
    times.push_back(seconds_since(t) * 1e3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::optional<std::string> load_winner(const fs::path &file) {
  std::ifstream in(file);
  std::string label;
  if (in && std::getline(in, label) && !label.empty())
    return label;
  return std::nullopt;
}

void store_winner(const fs::path &file, const std::string &label) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  std::random_device rd;
  fs::path tmp = file.string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  {
    std::ofstream out(tmp);
    out << label << "\n";
    if (!out)
      return;
  }
  fs::rename(tmp, file, ec); // atomic: readers see the old winner or the new one
  if (ec)
    fs::remove(tmp, ec);
}

} // namespace

namespace {
fs::path winnerFile(const std::string &family, const Target &target, const std::string &key,
                    const TuneTiming &timing) {
  std::string arch = target.kind == Target::Kind::Cuda ? cuda::device_arch() : "cpu";
  std::string t = target.str();
  std::string hash = timing.chain > 0
                         ? KernelCache::key({"kiln-tuning-v1", family, key, t, arch,
                                             "chain " + std::to_string(timing.chain)})
                         : KernelCache::key({"kiln-tuning-v1", family, key, t, arch});
  return fs::path(tuning_directory()) / (hash + ".txt");
}
} // namespace

std::optional<Tuned> autotune_cached(const std::string &family, const Target &target,
                                     const std::string &key, std::vector<TuneCandidate> &candidates,
                                     const TuneTiming &timing) {
  auto start = std::chrono::steady_clock::now();
  auto label = load_winner(winnerFile(family, target, key, timing));
  if (!label)
    return std::nullopt;
  for (auto &c : candidates)
    if (c.label == *label) {
      try {
        Tuned tuned;
        tuned.kernel_ = c.compile();
        tuned.run_ = c.run;
        tuned.label_ = c.label;
        tuned.from_disk_ = true;
        tuned.seconds_ = seconds_since(start);
        return tuned;
      } catch (const Error &) {
        return std::nullopt; // stale entry
      }
    }
  return std::nullopt;
}

Tuned autotune_candidates(const std::string &family, const Target &target, const std::string &key,
                          std::vector<TuneCandidate> candidates,
                          const std::function<bool(const std::string &)> &prune, const TuneTiming &timing) {
  auto start = std::chrono::steady_clock::now();
  if (prune)
    std::erase_if(candidates, [&](const TuneCandidate &c) { return prune(c.label); });
  if (candidates.empty())
    throw Error("kiln::autotune: no candidates left for '" + key + "' after pruning");

  fs::path file = winnerFile(family, target, key, timing);
  // A persisted winner: compile (usually a kernel-cache hit) and use only it.
  if (auto cached = autotune_cached(family, target, key, candidates, timing))
    return std::move(*cached);

  Tuned tuned;
  // Compile every candidate in parallel; failures score +inf.
  std::vector<std::unique_ptr<CompiledKernel>> kernels(candidates.size());
  std::vector<TuneResult> results(candidates.size());
  detail::parallel_for_each(unsigned(candidates.size()), [&](unsigned i) {
    results[i].label = candidates[i].label;
    try {
      kernels[i] = candidates[i].compile();
    } catch (const std::exception &e) {
      results[i].error = e.what();
    }
  });
  std::size_t best = candidates.size();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!kernels[i])
      continue;
    try {
      results[i].ms = measure(target, timing, [&] { candidates[i].run(*kernels[i]); });
    } catch (const std::exception &e) {
      results[i].error = e.what();
      continue;
    }
    if (best == candidates.size() || results[i].ms < results[best].ms)
      best = i;
  }
  if (best == candidates.size()) {
    std::string why;
    for (auto &r : results)
      why += "\n  " + r.label + ": " + r.error;
    throw Error("kiln::autotune: every candidate for '" + key + "' failed:" + why);
  }
  store_winner(file, candidates[best].label);
  tuned.kernel_ = std::move(kernels[best]);
  tuned.run_ = candidates[best].run;
  tuned.label_ = candidates[best].label;
  tuned.results_ = std::move(results);
  tuned.seconds_ = seconds_since(start);
  return tuned;
}

} // namespace kiln
