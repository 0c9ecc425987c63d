//===- common.hpp - what kiln_bench's benchmark files share ---------------===//
//
// Google Benchmark with manual timing from CUDA events (median of 20 runs per
// iteration batch). Counters: GB/s for memory-bound kernels (bytes read +
// written), TFLOP/s for matmuls. The device-to-device copy rate is measured
// in the same run as the bandwidth reference (see bench/baselines.py for
// the PyTorch numbers). The benchmarks are spread over rows.cpp (row-wise
// kernels), products.cpp (products and prefill attention) and decode.cpp
// (a decode step's kernels), compiled apart; main.cpp runs them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/softmax.hpp"
#include "kiln/runtime/cuda.hpp"
#include "kiln/runtime/tool.hpp"
#include "kiln/autotuner/autotune.hpp"
#include "kiln/autotuner/space.hpp"
#include "../cublas.hpp"
#include <benchmark/benchmark.h>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::microbench {

inline Target gpu() { return Target::cuda(cuda::device_arch()); }

template <class T> std::vector<T> random_host(std::size_t n) {
  std::vector<T> h(n);
  for (std::size_t i = 0; i < n; ++i)
    h[i] = T(float((i * 2654435761u) % 1000) / 500.f - 1.f);
  return h;
}
template <class T> cuda::DeviceBuffer<T> random_device(std::size_t n) { return cuda::DeviceBuffer<T>(random_host<T>(n)); }

/// `count` device buffers of n random halves each: weights used in turn,
/// together larger than L2.
inline std::vector<std::unique_ptr<cuda::DeviceBuffer<kiln::half>>> device_copies(std::size_t n, int count) {
  std::vector<std::unique_ptr<cuda::DeviceBuffer<kiln::half>>> out;
  for (int i = 0; i < count; ++i)
    out.push_back(std::make_unique<cuda::DeviceBuffer<kiln::half>>(random_host<kiln::half>(n)));
  return out;
}

inline void report(benchmark::State &state, double ms, double bytes, double flops) {
  state.SetIterationTime(ms / 1e3);
  if (bytes > 0)
    state.counters["GB/s"] = bytes / (ms / 1e3) / 1e9;
  if (flops > 0)
    state.counters["TFLOP/s"] = flops / (ms / 1e3) / 1e12;
}

/// `launches` launches made by `body`, captured once in a CUDA graph on
/// `stream` and replayed; reports the time and bandwidth (`bytes` read) per launch.
inline void time_graph(benchmark::State &state, cuda::Stream &stream, int launches, double bytes,
                const std::function<void()> &body) {
  auto graph = cuda::Graph::capture(stream, body);
  for (auto _ : state) {
    cuda::StreamScope scope(stream);
    double ms = cuda::time_ms([&] { graph.replay(stream); }, 20, 3) / launches;
    report(state, ms, bytes, 0);
  }
}

/// Times the tuned winner and labels the row with it.
inline void reportTuned(benchmark::State &state, const Tuned &tuned, double flops, const std::string &key) {
  // Every candidate's time goes to stderr (when this run tuned).
  for (const auto &r : tuned.results())
    std::fprintf(stderr, "%s %s %.4f ms %s\n", key.c_str(), r.label.c_str(), r.ms, r.error.c_str());
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { tuned.run(); }, 10, 2);
    report(state, ms, 0, flops);
  }
  state.SetLabel(tuned.label() + (tuned.from_disk() ? " (tuned earlier)" : ""));
  state.counters["tune_s"] = tuned.tuning_seconds();
}

/// How the tuned products may organise their programs on sm_90a.
inline const std::vector<Schedule> kSchedules{Schedule::Plain, Schedule::WarpSpecialized, Schedule::Persistent};

/// Producer warps need TMA copies, which need 64-column K panels: tiles with
/// BK = 32 (the last parameter of a plain product's name) only run as
/// written, so their specialised candidates are not compiled.
inline bool prune(const std::string &label) {
  std::string kernel = label.substr(0, label.find('/'));
  bool specialised = label.find("/ws") != std::string::npos || label.find("/persistent") != std::string::npos;
  return specialised && kernel.rfind("Grouped", 0) != 0 && kernel.size() > 3 &&
         kernel.compare(kernel.size() - 3, 3, "_32") == 0;
}

} // namespace kiln::microbench
