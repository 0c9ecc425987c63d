//===- kiln_bench.cpp - per-kernel GPU microbenchmarks --------------------===//
//
// Google Benchmark with manual timing from CUDA events (median of 20 runs per
// iteration batch). Counters: GB/s for memory-bound kernels (bytes read +
// written), TFLOP/s for matmuls. The device-to-device copy rate is measured
// in the same run as the bandwidth reference (see bench/baselines.py for
// the PyTorch numbers).
//
//===----------------------------------------------------------------------===//
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
#include "cublas.hpp"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

using namespace kiln;

namespace {

Target gpu() { return Target::cuda(cuda::device_arch()); }

template <class T> std::vector<T> random_host(std::size_t n) {
  std::vector<T> h(n);
  for (std::size_t i = 0; i < n; ++i)
    h[i] = T(float((i * 2654435761u) % 1000) / 500.f - 1.f);
  return h;
}
template <class T> cuda::DeviceBuffer<T> random_device(std::size_t n) { return cuda::DeviceBuffer<T>(random_host<T>(n)); }

/// `count` device buffers of n random halves each: weights used in turn,
/// together larger than L2.
std::vector<std::unique_ptr<cuda::DeviceBuffer<kiln::half>>> device_copies(std::size_t n, int count) {
  std::vector<std::unique_ptr<cuda::DeviceBuffer<kiln::half>>> out;
  for (int i = 0; i < count; ++i)
    out.push_back(std::make_unique<cuda::DeviceBuffer<kiln::half>>(random_host<kiln::half>(n)));
  return out;
}

void report(benchmark::State &state, double ms, double bytes, double flops) {
  state.SetIterationTime(ms / 1e3);
  if (bytes > 0)
    state.counters["GB/s"] = bytes / (ms / 1e3) / 1e9;
  if (flops > 0)
    state.counters["TFLOP/s"] = flops / (ms / 1e3) / 1e12;
}

/// `launches` launches made by `body`, captured once in a CUDA graph on
/// `stream` and replayed; reports the time and bandwidth (`bytes` read) per launch.
void time_graph(benchmark::State &state, cuda::Stream &stream, int launches, double bytes,
                const std::function<void()> &body) {
  auto graph = cuda::Graph::capture(stream, body);
  for (auto _ : state) {
    cuda::StreamScope scope(stream);
    double ms = cuda::time_ms([&] { graph.replay(stream); }, 20, 3) / launches;
    report(state, ms, bytes, 0);
  }
}

template <int BLOCK> void BM_vec_add(benchmark::State &state) {
  int n = int(state.range(0));
  auto x = random_device<kiln::half>(n), y = random_device<kiln::half>(n);
  cuda::DeviceBuffer<kiln::half> out(n);
  auto k = compile<ops::VecAdd<f16, BLOCK>>(gpu());
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(ceil_div(n, BLOCK)), x.data(), y.data(), out.data(), n); });
    report(state, ms, 3.0 * n * 2, 0);
  }
}

template <int BLOCK, bool ONE> void BM_softmax(benchmark::State &state) {
  int rows = int(state.range(0)), cols = int(state.range(1));
  auto x = random_device<kiln::half>(std::size_t(rows) * cols);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * cols);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::Softmax<f16, BLOCK, ONE>>(gpu(), o);
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(rows), x.data(), y.data(), cols, cols, cols); });
    report(state, ms, 2.0 * rows * cols * 2, 0);
  }
}

/// A row over a cluster of CLUSTER programs (ops::SoftmaxCluster):
/// {rows, cols, warps}.
template <int BLOCK, int CLUSTER> void BM_softmax_cluster(benchmark::State &state) {
  int rows = int(state.range(0)), cols = int(state.range(1));
  if (!ops::softmax_cluster_fits<f16, BLOCK, CLUSTER>(cols)) {
    state.SkipWithError("the row does not fit the cluster");
    return;
  }
  auto x = random_device<kiln::half>(std::size_t(rows) * cols);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * cols);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::SoftmaxCluster<f16, BLOCK, CLUSTER>>(gpu(), o);
  state.SetLabel("a row over a cluster of " + std::to_string(CLUSTER) + " programs of BLOCK " +
                 std::to_string(BLOCK) + ", " + std::to_string(state.range(2)) + " warps");
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(rows * CLUSTER), x.data(), y.data(), cols, cols, cols); });
    report(state, ms, 2.0 * rows * cols * 2, 0);
  }
}

template <int BLOCK, bool ONE> void BM_layernorm(benchmark::State &state) {
  int rows = int(state.range(0)), n = int(state.range(1));
  auto x = random_device<kiln::half>(std::size_t(rows) * n);
  auto w = random_device<kiln::half>(n), b = random_device<kiln::half>(n);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * n);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::LayerNorm<f16, BLOCK, ONE>>(gpu(), o);
  for (auto _ : state) {
    double ms = cuda::time_ms(
        [&] { k.launch(Grid(rows), x.data(), w.data(), b.data(), y.data(), n, n, 1e-5f); });
    report(state, ms, 2.0 * rows * n * 2, 0);
  }
}

/// A row-looping kernel (ops::SoftmaxRows, LayerNormRows) on a (rows, cols)
/// f16 input and output, from the benchmark's arguments {rows, cols, warps,
/// programs a multiprocessor (0: one program per block of ROWS rows)}.
template <class K, int ROWS, int BLOCK> struct RowsRun {
  int rows, cols;
  cuda::DeviceBuffer<kiln::half> x, y;
  Kernel<K> kernel;
  Grid grid;
  explicit RowsRun(benchmark::State &state)
      : rows(int(state.range(0))), cols(int(state.range(1))),
        x(random_device<kiln::half>(std::size_t(rows) * cols)), y(std::size_t(rows) * cols),
        kernel(compile<K>(gpu(), options(state))), grid(1) {
    int per_sm = int(state.range(3)), blocks = ceil_div(rows, ROWS);
    grid = Grid(per_sm > 0 ? std::min(blocks, per_sm * cuda::multiprocessor_count()) : blocks);
    state.SetLabel(std::to_string(ROWS) + " rows of BLOCK " + std::to_string(BLOCK) + ", " +
                   std::to_string(state.range(2)) + " warps, " +
                   (per_sm > 0 ? std::to_string(per_sm) + " programs an SM" : "a program per block of rows"));
  }
  static CompileOptions options(const benchmark::State &state) {
    CompileOptions o;
    o.num_warps = int(state.range(2));
    return o;
  }
  /// Times `launch(kernel, grid)`; the bandwidth counts x read and y written.
  template <class F> void time(benchmark::State &state, F launch) {
    for (auto _ : state) {
      double ms = cuda::time_ms([&] { launch(kernel, grid); });
      report(state, ms, 2.0 * rows * cols * 2, 0);
    }
  }
};

template <int ROWS, int BLOCK> void BM_softmax_rows(benchmark::State &state) {
  RowsRun<ops::SoftmaxRows<f16, ROWS, BLOCK>, ROWS, BLOCK> run(state);
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), run.y.data(), run.rows, run.cols, run.cols, run.cols);
  });
}

/// Wide rows a row at a time over a grid of `programs an SM` times the SMs.
template <int BLOCK> void BM_softmax_wide(benchmark::State &state) {
  RowsRun<ops::SoftmaxWide<f16, BLOCK>, 1, BLOCK> run(state);
  state.SetLabel("wide rows a row at a time, BLOCK " + std::to_string(BLOCK) + ", " +
                 std::to_string(state.range(2)) + " warps, " + std::to_string(state.range(3)) + " programs an SM");
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), run.y.data(), run.rows, run.cols, run.cols, run.cols);
  });
}

template <int ROWS, int BLOCK> void BM_layernorm_rows(benchmark::State &state) {
  RowsRun<ops::LayerNormRows<f16, ROWS, BLOCK>, ROWS, BLOCK> run(state);
  auto w = random_device<kiln::half>(run.cols), b = random_device<kiln::half>(run.cols);
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), w.data(), b.data(), run.y.data(), run.rows, run.cols, run.cols, 1e-5f);
  });
}

/// Operands of an (M, K) x (K, N) product with a bias, from the benchmark's
/// arguments {M, K, N}.
template <class T = kiln::half> struct Product {
  int M, K, N;
  cuda::DeviceBuffer<T> a, b, bias, c;
  explicit Product(const benchmark::State &state)
      : M(int(state.range(0))), K(int(state.range(1))), N(int(state.range(2))),
        a(random_device<T>(std::size_t(M) * K)), b(random_device<T>(std::size_t(K) * N)),
        bias(random_device<T>(N)), c(std::size_t(M) * N) {}
  std::string shape() const {
    return std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
  }
};

/// Times the tuned winner and labels the row with it.
void reportTuned(benchmark::State &state, const Tuned &tuned, double flops, const std::string &key) {
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
const std::vector<Schedule> kSchedules{Schedule::Plain, Schedule::WarpSpecialized, Schedule::Persistent};

/// Producer warps need TMA copies, which need 64-column K panels: tiles with
/// BK = 32 (the last parameter of a plain product's name) only run as
/// written, so their specialised candidates are not compiled.
bool prune(const std::string &label) {
  std::string kernel = label.substr(0, label.find('/'));
  bool specialised = label.find("/ws") != std::string::npos || label.find("/persistent") != std::string::npos;
  return specialised && kernel.rfind("Grouped", 0) != 0 && kernel.size() > 3 &&
         kernel.compare(kernel.size() - 3, 3, "_32") == 0;
}

/// Tuned matmul (+bias+gelu): the autotuner picks tile sizes, warps, stages
/// and schedule (plain, producer warp, persistent) for this shape.
template <bool BIAS> void BM_matmul(benchmark::State &state) {
  Product<> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    Grid grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN));
    if constexpr (BIAS)
      k.launch(grid, a.data(), b.data(), bias.data(), c.data(), M, N, K, K, N, N);
    else
      k.launch(grid, a.data(), b.data(), c.data(), M, N, K, K, N, N);
  };
  std::string key = p.shape();
  auto tune = [&] {
    if constexpr (BIAS)
      return autotune<ops::MatmulBiasGelu<f16, 64, 64, 32>, ops::MatmulBiasGelu<f16, 128, 64, 32>,
                      ops::MatmulBiasGelu<f16, 64, 128, 32>, ops::MatmulBiasGelu<f16, 128, 128, 32>,
                      ops::MatmulBiasGelu<f16, 128, 128, 64>, ops::MatmulBiasGelu<f16, 128, 256, 32>,
                      ops::MatmulBiasGelu<f16, 64, 128, 64>, ops::MatmulBiasGelu<f16, 64, 256, 64>,
                      ops::MatmulBiasGelu<f16, 128, 256, 64>, ops::MatmulBiasGelu<f16, 128, 128, 128>,
                      ops::GroupedMatmulBiasGelu<f16, 128, 256, 64, 8>>(
          gpu(), key, TuneSpace({4, 8}, {2, 3, 4}, kSchedules), launch, prune);
    else
      return autotune<ops::Matmul<f16, 64, 64, 32>, ops::Matmul<f16, 128, 64, 32>,
                      ops::Matmul<f16, 64, 128, 32>, ops::Matmul<f16, 128, 128, 32>,
                      ops::Matmul<f16, 128, 128, 64>, ops::Matmul<f16, 128, 256, 32>,
                      ops::Matmul<f16, 64, 128, 64>, ops::Matmul<f16, 64, 256, 64>,
                      ops::Matmul<f16, 128, 256, 64>, ops::Matmul<f16, 128, 128, 128>,
                      ops::Matmul<f16, 128, 192, 64>, ops::GroupedMatmul<f16, 128, 256, 64, 8>,
                      ops::GroupedMatmul<f16, 128, 256, 64, 16>>(
          gpu(), key, TuneSpace({4, 8}, {2, 3, 4}, kSchedules), launch, prune);
  };
  reportTuned(state, tune(), 2.0 * M * N * K, (BIAS ? "bias+gelu " : "") + key);
}

/// Tuned bf16 matmul over the tiles that run on wgmma on Hopper.
void BM_matmul_bf16(benchmark::State &state) {
  Product<kiln::bfloat16> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN)), a.data(), b.data(), c.data(), M, N, K, K,
             N, N);
  };
  auto tuned = autotune<ops::Matmul<bf16, 128, 128, 64>, ops::Matmul<bf16, 128, 256, 64>,
                        ops::Matmul<bf16, 64, 256, 64>, ops::Matmul<bf16, 128, 128, 32>,
                        ops::Matmul<bf16, 128, 192, 64>, ops::GroupedMatmul<bf16, 128, 256, 64, 8>,
                        ops::GroupedMatmul<bf16, 128, 256, 64, 16>>(
      gpu(), "bf16 " + p.shape(), TuneSpace({4, 8}, {2, 3, 4}, kSchedules), launch, prune);
  reportTuned(state, tuned, 2.0 * M * N * K, "bf16 " + p.shape());
}

/// Tuned f32 matmul on TF32 tensor cores (wgmma on sm_90a), B as (K, N) or,
/// with BT, transposed (N, K); cuBLAS with TF32 in the same process is
/// BM_cublas_tf32.
template <bool BT> void BM_matmul_tf32(benchmark::State &state) {
  Product<float> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN)), a.data(), b.data(), c.data(), M, N, K, K,
             BT ? K : N, N);
  };
  // TF32 wgmma needs 16 rows per warp (a warpgroup per 64 rows); other
  // warp counts would time the f32 FMA fallback.
  auto prune_tf32 = [](const std::string &label) {
    int bm = std::stoi(label.substr(label.find('_') + 1));
    int warps = std::stoi(label.substr(label.find("/w") + 2));
    return bm != 16 * warps;
  };
  std::string key = std::string("tf32 ") + (BT ? "B^T " : "") + p.shape();
  auto tuned = autotune<ops::MatmulTF32<128, 128, 32, BT>, ops::MatmulTF32<128, 256, 32, BT>,
                        ops::MatmulTF32<128, 128, 64, BT>, ops::MatmulTF32<64, 256, 32, BT>,
                        ops::MatmulTF32<128, 256, 32, BT, 8>, ops::MatmulTF32<128, 256, 32, BT, 16>>(
      gpu(), key, TuneSpace({4, 8}, {2, 3, 4}, kSchedules), launch, prune_tf32);
  reportTuned(state, tuned, 2.0 * M * N * K, key);
}

/// cuBLAS's TF32 product (CUBLAS_COMPUTE_32F_FAST_TF32) on the same shapes.
template <bool BT> void BM_cublas_tf32(benchmark::State &state) {
  Product<float> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  bench::Cublas blas;
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { blas.matmul_tf32(a.data(), b.data(), c.data(), M, N, K, BT); }, 10, 2);
    report(state, ms, 0, 2.0 * M * N * K);
  }
}

/// The prefill products of the GPT-2 decoder (QKV with bias, fc with
/// bias+gelu, projections with bias and the residual added in place), tuned
/// over tile shapes, warps and stages at the shapes a batch of prompts
/// packs into. Every candidate's time goes to stderr.
template <template <class, int, int, int> class Op> void BM_prefill(benchmark::State &state) {
  Product<> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    Grid grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN));
    if constexpr (std::is_same_v<Op<f16, 1, 1, 1>, ops::MatmulBiasResidual<f16, 1, 1, 1>>)
      k.launch(grid, a.data(), b.data(), bias.data(), c.data(), c.data(), M, N, K, K, N, N);
    else
      k.launch(grid, a.data(), b.data(), bias.data(), c.data(), M, N, K, K, N, N);
  };
  std::string key = "prefill " + p.shape();
  // The declared space (kiln/autotuner/space.hpp), as nn::Linear declares
  // its own: infeasible candidates are pruned at compile time.
  namespace hana = boost::hana;
  auto space = tuning::product(
      hana::tuple_t<Op<f16, 32, 32, 32>, Op<f16, 32, 64, 64>, Op<f16, 64, 32, 64>, Op<f16, 64, 64, 32>,
                    Op<f16, 64, 64, 64>, Op<f16, 128, 64, 32>, Op<f16, 128, 64, 64>, Op<f16, 64, 128, 64>,
                    Op<f16, 128, 128, 32>, Op<f16, 128, 128, 64>>,
      tuning::kWarps, hana::tuple_c<int, 2, 3>, tuning::kSchedules);
  auto tuned = tuning::autotune(space, gpu(), key, launch);
  reportTuned(state, tuned, 2.0 * M * N * K, key);
}

/// Causal flash-attention prefill as the GPT-2 decoder runs it: B prompts of
/// S tokens each, packed (qkv: (B*S, 3*H*D)), keys and values read from the
/// per-sequence caches (B, S, H*D). TFLOP/s counts the causal half of
/// Q K^T and P V (2 * 2 * B * H * S * S * D / 2).
template <int D, int BM = 64, int WARPS = 4, int STAGES = 2> void BM_attention_prefill(benchmark::State &state) {
  int B = int(state.range(0)), H = int(state.range(1)), S = int(state.range(2)), C = H * D;
  auto qkv = random_device<kiln::half>(std::size_t(B) * S * 3 * C);
  auto kc = random_device<kiln::half>(std::size_t(B) * S * C);
  auto vc = random_device<kiln::half>(std::size_t(B) * S * C);
  cuda::DeviceBuffer<kiln::half> out(std::size_t(B) * S * C);
  std::vector<int> start(B), length(B, S);
  for (int b = 0; b < B; ++b)
    start[b] = b * S;
  cuda::DeviceBuffer<int> d_start(start), d_length(length);
  CompileOptions options;
  options.num_warps = WARPS;
  options.num_stages = STAGES;
  auto k = compile<ops::AttentionPrefill<f16, BM, 64, D>>(gpu(), options);
  Grid grid(ceil_div(S, BM), H, B);
  float scale = 1.0f / std::sqrt(float(D));
  for (auto _ : state) {
    double ms = cuda::time_ms([&] {
      k.launch(grid, qkv.data(), kc.data(), vc.data(), out.data(), d_start.data(), d_length.data(), C, S, scale);
    });
    report(state, ms, 0, 2.0 * B * H * double(S) * S * D);
  }
}

/// Decode attention as a GPT-2 124M step runs it (12 heads of 64, a
/// 1024-position cache): B sequences of `keys` keys each, 32 launches
/// chained in one CUDA graph, each a programmatic dependent of the one
/// before; GB/s is on the keys and values read. K is ops::AttentionDecode
/// (partials in global memory, the last program merges),
/// ops::AttentionDecodeCluster (merged through a cluster's shared memory) or
/// ops::AttentionDecodeResident (every key loaded before the wait).
template <class K, int WARPS> void BM_attention_decode(benchmark::State &state) {
  const int B = int(state.range(0)), keys = int(state.range(1)), H = 12, D = 64, C = H * D, Tmax = 1024;
  const int launches = 32;
  auto qkv = random_device<kiln::half>(std::size_t(B) * 3 * C);
  auto kc = random_device<kiln::half>(std::size_t(B) * Tmax * C);
  auto vc = random_device<kiln::half>(std::size_t(B) * Tmax * C);
  cuda::DeviceBuffer<kiln::half> out(std::size_t(B) * C);
  cuda::DeviceBuffer<float> part(std::size_t(B) * H * K::Splits * (D + 2));
  cuda::DeviceBuffer<int32_t> counter(std::vector<int32_t>(std::size_t(B) * H, 0));
  cuda::DeviceBuffer<int32_t> pos(std::vector<int32_t>(std::size_t(B), keys - 1));
  CompileOptions options;
  options.num_warps = WARPS;
  auto k = compile<K>(gpu(), options);
  Grid grid = K::grid(B, H);
  float scale = 1.0f / std::sqrt(float(D));
  cuda::Stream stream;
  time_graph(state, stream, launches, 2.0 * B * H * double(keys) * D * 2, [&] {
    for (int i = 0; i < launches; ++i)
      k.launch(grid, qkv.data(), kc.data(), vc.data(), part.data(), counter.data(), out.data(), pos.data(), C,
               Tmax, scale);
  });
}

/// cuBLAS on the same shapes, in the same process: cublasGemmEx for the
/// plain product, cuBLASLt with its GELU_BIAS epilogue for the fused one.
template <bool BIAS, class T = kiln::half> void BM_cublas(benchmark::State &state) {
  Product<T> p(state);
  auto &[M, K, N, a, b, bias, c] = p;
  static bench::Cublas *blas = [] {
    try {
      return new bench::Cublas();
    } catch (const std::exception &) {
      return static_cast<bench::Cublas *>(nullptr);
    }
  }();
  if (!blas) {
    state.SkipWithError("cuBLAS not available");
    return;
  }
  for (auto _ : state) {
    double ms = cuda::time_ms(
        [&] {
          if constexpr (BIAS)
            blas->matmul_bias_gelu(a.data(), b.data(), bias.data(), c.data(), M, N, K);
          else
            blas->matmul(a.data(), b.data(), c.data(), M, N, K,
                         std::is_same_v<T, kiln::bfloat16> ? CUDA_R_16BF : CUDA_R_16F);
        },
        10, 2);
    report(state, ms, 0, 2.0 * M * N * K);
  }
}

/// Decode-like matmul+bias+gelu: `copies` distinct weight matrices (together
/// larger than L2) used back to back, captured once in a CUDA graph; the time
/// per launch and the bandwidth on the weights are reported.
void BM_decode_mlp(benchmark::State &state) {
  int M = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2));
  const int copies = 32;
  auto x = random_device<kiln::half>(std::size_t(M) * K);
  auto w = device_copies(std::size_t(K) * N, copies), bias = device_copies(N, copies);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(M) * N);
  int which = 0;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN)), x.data(), w[which]->data(),
             bias[which]->data(), y.data(), M, N, K, K, N, N);
  };
  auto tuned = autotune<ops::MatmulBiasGelu<f16, 16, 64, 64>, ops::MatmulBiasGelu<f16, 16, 128, 64>,
                        ops::MatmulBiasGelu<f16, 16, 32, 128>, ops::MatmulBiasGelu<f16, 64, 64, 32>>(
      gpu(), "decode " + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N),
      TuneSpace({1, 2, 4}, {1, 2, 3}),
      launch);
  cuda::Stream stream;
  time_graph(state, stream, copies, double(K) * N * 2, [&] {
    for (which = 0; which < copies; ++which)
      tuned.run();
  });
  state.SetLabel(tuned.label());
}

/// Tunes a few-row product over `space` (every candidate's time to stderr)
/// and times the winner: BM_few_rows and BM_many_rows.
template <int BR, class Space> void few_rows_bench(benchmark::State &state, Space space, const char *name) {
  int M = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2));
  bool ahead = state.range(3) != 0;
  const int copies = 32;
  auto x = random_device<kiln::half>(std::size_t(M) * K);
  auto w = device_copies(std::size_t(K) * N, copies), bias = device_copies(N, copies);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(M) * N);
  cuda::DeviceBuffer<float> partial(std::size_t(K / 64 + 1) * N * BR);
  cuda::DeviceBuffer<int32_t> counter(std::vector<int32_t>(std::size_t(N / 16 + 1), 0));
  int which = 0;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(N, Kern::BN), Kern::splits(K)), x.data(), w[which]->data(), bias[which]->data(),
             y.data(), y.data(), partial.data(), counter.data(), M, N, K, w[(which + 1) % copies]->data(),
             ahead ? K * N : 0);
    which = (which + 1) % copies;
  };
  std::string key = name + (" " + std::to_string(M)) + "x" + std::to_string(K) + "x" + std::to_string(N);
  auto tuned = tuning::autotune(space, gpu(), key, launch, {}, TuneTiming{copies});
  for (const auto &r : tuned.results())
    std::fprintf(stderr, "%s %s %.4f ms %s\n", key.c_str(), r.label.c_str(), r.ms, r.error.c_str());
  cuda::Stream stream;
  time_graph(state, stream, copies, double(K) * N * 2, [&] {
    for (int i = 0; i < copies; ++i)
      tuned.run();
  });
  state.SetLabel(tuned.label());
}

/// A decode step's product at a batch of M (2 to 16) rows: x [M, K] times
/// `copies` distinct weights (together larger than L2) used in turn, each
/// [N, K] (transposed, as the decode kernels take it), with
/// ops::FewRowsLinear; tuned over column tiles, K chunks and their count
/// (hence the split of K) and warps (every candidate's time to stderr), then
/// timed as one CUDA graph of the 32 launches. GB/s is on the weights. With
/// a fourth argument of 1 each launch also brings the next launch's weight
/// into L2 (kiln.prefetch), as a decode step's products do with
/// ModelOptions::prefetch_weights.
void BM_few_rows(benchmark::State &state) {
  namespace hana = boost::hana;
  using E = ops::Epilogue;
  auto space = tuning::product(
      hana::tuple_t<ops::FewRowsLinear<f16, 16, 16, 128, 1, E::Bias>, ops::FewRowsLinear<f16, 16, 16, 128, 2, E::Bias>,
                    ops::FewRowsLinear<f16, 16, 16, 256, 2, E::Bias>, ops::FewRowsLinear<f16, 16, 16, 256, 3, E::Bias>,
                    ops::FewRowsLinear<f16, 16, 32, 128, 1, E::Bias>, ops::FewRowsLinear<f16, 16, 32, 128, 2, E::Bias>,
                    ops::FewRowsLinear<f16, 16, 32, 256, 1, E::Bias>, ops::FewRowsLinear<f16, 16, 32, 256, 2, E::Bias>,
                    ops::FewRowsLinear<f16, 16, 32, 256, 3, E::Bias>, ops::FewRowsLinear<f16, 16, 64, 128, 1, E::Bias>,
                    ops::FewRowsLinear<f16, 16, 64, 128, 2, E::Bias>, ops::FewRowsLinear<f16, 16, 64, 256, 1, E::Bias>>,
      hana::tuple_c<int, 1, 2, 4, 8>, tuning::kNoStages, tuning::kPlainOnly);
  few_rows_bench<16>(state, space, "few rows");
}

/// BM_few_rows for a batch of 17 to BR rows (BR = 32 or 64): ops::FewRowsLinear
/// with BR rows, the activations the mma's BR-wide side, over panels that
/// keep the weights and activations of a program within its registers.
template <int BR> void BM_many_rows(benchmark::State &state) {
  namespace hana = boost::hana;
  constexpr auto B = ops::Epilogue::Bias;
  auto space = tuning::product(
      hana::tuple_t<ops::FewRowsLinear<f16, BR, 16, 64, 1, B>, ops::FewRowsLinear<f16, BR, 16, 128, 1, B>,
                    ops::FewRowsLinear<f16, BR, 16, 128, 2, B>, ops::FewRowsLinear<f16, BR, 16, 256, 1, B>,
                    ops::FewRowsLinear<f16, BR, 32, 64, 1, B>, ops::FewRowsLinear<f16, BR, 32, 64, 2, B>,
                    ops::FewRowsLinear<f16, BR, 32, 128, 1, B>, ops::FewRowsLinear<f16, BR, 32, 128, 2, B>,
                    ops::FewRowsLinear<f16, BR, 32, 256, 1, B>, ops::FewRowsLinear<f16, BR, 64, 64, 1, B>,
                    ops::FewRowsLinear<f16, BR, 64, 128, 1, B>, ops::FewRowsLinear<f16, BR, 64, 64, 2, B>>,
      hana::tuple_c<int, 2, 4, 8>, tuning::kNoStages, tuning::kPlainOnly);
  few_rows_bench<BR>(state, space, "many rows");
}

/// A decode step's product of R rows: x [R, K] times 32 distinct weights
/// [N, K] (more than L2 in all) in turn, with ops::DecodeLinear (LN: the
/// layernorm of x inside; E: its epilogue), tuned over columns a program
/// and warps as graphs of the 32 launches, each a programmatic dependent of
/// the one before (every candidate's time to stderr), then timed the same
/// way.
/// GB/s is on the weights. bench/boundary.cu times the same chain written
/// directly in CUDA, and what the boundary between two launches costs.
template <int R, int K, bool LN, ops::Epilogue E> void BM_decode_rows(benchmark::State &state) {
  int N = int(state.range(0));
  const int copies = 32;
  auto x = random_device<kiln::half>(R * K), g = random_device<kiln::half>(K), b = random_device<kiln::half>(K);
  auto w = device_copies(std::size_t(K) * N, copies), bias = device_copies(N, copies);
  cuda::DeviceBuffer<kiln::half> y(static_cast<std::size_t>(R) * N);
  int which = 0;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(N, Kern::BN)), x.data(), g.data(), b.data(), w[which]->data(), bias[which]->data(),
             y.data(), y.data(), R, N, 1e-5f, w[which]->data(), 0);
    which = (which + 1) % copies;
  };
  tuning::Candidates<ops::DecodeLinear<f16, 2>, ops::DecodeLinear<f16, 4>, ops::DecodeLinear<f16, 8>,
                     ops::DecodeLinear<f16, 16>>
      space;
  auto add = [&]<int BN>() {
    space.add_feasible(ops::DecodeLinear<f16, BN>{.rows = R, .k = K, .ln = LN, .epilogue = E}, {1, 2, 4, 8});
  };
  add.template operator()<2>();
  add.template operator()<4>();
  add.template operator()<8>();
  add.template operator()<16>();
  std::string key = "decode rows " + std::to_string(R) + "x" + std::to_string(K) + "x" + std::to_string(N) + (LN ? " ln" : "") + " e" +
                    std::to_string(int(E));
  auto tuned = tuning::autotune(space, gpu(), key, launch, {}, TuneTiming{copies});
  for (const auto &r : tuned.results())
    std::fprintf(stderr, "%s %s %.4f ms %s\n", key.c_str(), r.label.c_str(), r.ms, r.error.c_str());
  cuda::Stream stream;
  time_graph(state, stream, copies, double(K) * N * 2, [&] {
    for (int i = 0; i < copies; ++i)
      tuned.run();
  });
  state.SetLabel(tuned.label());
}

/// GPT-2 124M's decode MLP of R rows (768 -> 3072 -> 768): 32 of them on
/// distinct weights (300 MB, more than L2) chained in one graph, each launch
/// a programmatic dependent of the one before. BM_mlp_fused runs each as
/// one ops::DecodeMlp launch (tuned over hidden units a program, chunk and
/// warps, every candidate's time to stderr); BM_mlp_two as the model has
/// run it, two ops::DecodeLinear launches (the layernorm, up, bias and gelu;
/// then down, bias and residual), each tuned the same way. Times are per
/// MLP; GB/s is on the two weights.
template <int R> struct MlpWeights {
  static constexpr int C = 768, H = 3072, copies = 32;
  cuda::DeviceBuffer<kiln::half> x = random_device<kiln::half>(R * C), g = random_device<kiln::half>(C),
                                 b = random_device<kiln::half>(C), hidden = random_device<kiln::half>(R * H),
                                 y = random_device<kiln::half>(R * C);
  std::vector<std::unique_ptr<cuda::DeviceBuffer<kiln::half>>> wu = device_copies(std::size_t(H) * C, copies),
                                                                bu = device_copies(H, copies),
                                                                wd = device_copies(std::size_t(H) * C, copies),
                                                                bd = device_copies(C, copies);
  static constexpr double bytes = 2.0 * H * C * 2;
};

template <int R> void BM_mlp_fused(benchmark::State &state) {
  MlpWeights<R> w;
  constexpr int C = MlpWeights<R>::C, H = MlpWeights<R>::H, copies = MlpWeights<R>::copies;
  cuda::DeviceBuffer<float> acc{std::vector<float>(std::size_t(R) * C, 0.f)};
  cuda::DeviceBuffer<int32_t> counter(std::vector<int32_t>(1, 0));
  int which = 0;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(H, Kern::BN)), w.x.data(), w.g.data(), w.b.data(), w.wu[which]->data(),
             w.bu[which]->data(), w.wd[which]->data(), w.bd[which]->data(), w.y.data(), acc.data(), counter.data(), R,
             H, 1e-5f, w.wu[which]->data(), 0);
    which = (which + 1) % copies;
  };
  tuning::Candidates<ops::DecodeMlp<f16, 8, 128>, ops::DecodeMlp<f16, 8, 256>, ops::DecodeMlp<f16, 16, 128>,
                     ops::DecodeMlp<f16, 16, 256>, ops::DecodeMlp<f16, 32, 128>, ops::DecodeMlp<f16, 32, 256>>
      space;
  auto add = [&]<int BH, int KC>() { space.add_feasible(ops::DecodeMlp<f16, BH, KC>{.rows = R, .c = C}, {2, 4, 8}); };
  add.template operator()<8, 128>();
  add.template operator()<8, 256>();
  add.template operator()<16, 128>();
  add.template operator()<16, 256>();
  add.template operator()<32, 128>();
  add.template operator()<32, 256>();
  std::string key = "mlp fused " + std::to_string(R);
  auto tuned = tuning::autotune(space, gpu(), key, launch, {}, TuneTiming{copies});
  for (const auto &r : tuned.results())
    std::fprintf(stderr, "%s %s %.4f ms %s\n", key.c_str(), r.label.c_str(), r.ms, r.error.c_str());
  cuda::Stream stream;
  time_graph(state, stream, copies, MlpWeights<R>::bytes, [&] {
    for (int i = 0; i < copies; ++i)
      tuned.run();
  });
  state.SetLabel(tuned.label());
}

template <int R> void BM_mlp_two(benchmark::State &state) {
  MlpWeights<R> w;
  constexpr int C = MlpWeights<R>::C, H = MlpWeights<R>::H, copies = MlpWeights<R>::copies;
  using DE = ops::Epilogue;
  int up = 0, down = 0;
  auto launchUp = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(H, Kern::BN)), w.x.data(), w.g.data(), w.b.data(), w.wu[up]->data(), w.bu[up]->data(),
             w.hidden.data(), w.hidden.data(), R, H, 1e-5f, w.wu[up]->data(), 0);
    up = (up + 1) % copies;
  };
  auto launchDown = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    k.launch(Grid(ceil_div(C, Kern::BN)), w.hidden.data(), w.g.data(), w.b.data(), w.wd[down]->data(),
             w.bd[down]->data(), w.x.data(), w.y.data(), R, C, 1e-5f, w.wd[down]->data(), 0);
    down = (down + 1) % copies;
  };
  // (The down kernels read the weight as [N, K]: a [768, 3072] copy, the
  // same bytes as the fused kernel's [3072, 768].)
  using Space = tuning::Candidates<ops::DecodeLinear<f16, 4>, ops::DecodeLinear<f16, 8>, ops::DecodeLinear<f16, 16>>;
  Space upSpace, downSpace;
  auto add = [&]<int BN>() {
    upSpace.add_feasible(ops::DecodeLinear<f16, BN>{.rows = R, .k = C, .ln = true, .epilogue = DE::BiasGelu},
                         {1, 2, 4, 8});
    downSpace.add_feasible(ops::DecodeLinear<f16, BN>{.rows = R, .k = H, .epilogue = DE::BiasResidual}, {1, 2, 4, 8});
  };
  add.template operator()<4>();
  add.template operator()<8>();
  add.template operator()<16>();
  auto tunedUp = tuning::autotune(upSpace, gpu(), "mlp up " + std::to_string(R), launchUp, {}, TuneTiming{copies});
  auto tunedDown =
      tuning::autotune(downSpace, gpu(), "mlp down " + std::to_string(R), launchDown, {}, TuneTiming{copies});
  cuda::Stream stream;
  time_graph(state, stream, copies, MlpWeights<R>::bytes, [&] {
    for (int i = 0; i < copies; ++i) {
      tunedUp.run();
      tunedDown.run();
    }
  });
  state.SetLabel(tunedUp.label() + " + " + tunedDown.label());
}

/// cuBLAS on the products of BM_few_rows (x [M, K] times one of 32 weights
/// [K, N], cublasGemmEx), timed the same way: one CUDA graph of 32 launches.
void BM_cublas_few_rows(benchmark::State &state) {
  int M = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2));
  const int copies = 32;
  auto x = random_device<kiln::half>(std::size_t(M) * K);
  auto w = device_copies(std::size_t(K) * N, copies);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(M) * N);
  bench::Cublas blas;
  cuda::Stream stream;
  blas.set_stream(stream.handle());
  auto all = [&] {
    for (int i = 0; i < copies; ++i)
      blas.matmul(x.data(), w[i]->data(), y.data(), M, N, K);
  };
  {
    cuda::StreamScope scope(stream);
    all(); // cuBLAS picks and loads its kernels before the capture
  }
  time_graph(state, stream, copies, double(K) * N * 2, all);
}

} // namespace

BENCHMARK(BM_vec_add<2048>)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<1024, false>)->Args({8192, 4096, 4})->Args({8192, 4096, 8})
    ->Args({4096, 50257, 8})->Args({32768, 1024, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<4096, true>)->Args({8192, 4096, 8})->Args({8192, 4096, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<1024, true>)->Args({32768, 1024, 4})->Args({32768, 1024, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<4096, false>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<8192, false>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// The whole 50257-wide row in one block, held in registers: one read, one
// write, but 64-128 values a thread spill (0.73-0.79 TB/s on an H100 against
// 1.69 for the two sweeps above; bench/README.md).
BENCHMARK(BM_softmax<65536, true>)->Args({4096, 50257, 32})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// A row over a thread-block cluster, read once: {rows, cols, warps}. Slower
// than the two sweeps (0.71-1.09 TB/s on an H100 against 1.69; bench/README.md).
BENCHMARK(BM_softmax_cluster<8192, 7>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<16384, 4>)->Args({4096, 50257, 16})->Args({4096, 50257, 32})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<8192, 8>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<2048, 3>)->Args({8192, 4096, 4})->Args({8192, 4096, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// Wide rows a row at a time: {rows, cols, warps, programs an SM}.
BENCHMARK(BM_softmax_wide<2048>)->Args({4096, 50257, 8, 1})->Args({4096, 50257, 8, 2})->Args({4096, 50257, 8, 4})
    ->Args({4096, 50257, 16, 1})->Args({4096, 50257, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_wide<4096>)->Args({4096, 50257, 16, 1})->Args({4096, 50257, 16, 2})
    ->Args({4096, 50257, 32, 1})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_wide<1024>)->Args({4096, 50257, 8, 2})->Args({4096, 50257, 8, 4})
    ->Args({8192, 4096, 8, 2})->Args({8192, 4096, 8, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// Short rows several at a time: {rows, cols, warps, programs an SM (0: a
// program per block of rows)}.
BENCHMARK(BM_softmax_rows<1, 4096>)->Args({8192, 4096, 8, 0})->Args({8192, 4096, 8, 4})
    ->Args({8192, 4096, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<2, 4096>)->Args({8192, 4096, 8, 2})->Args({8192, 4096, 16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<2, 1024>)->Args({32768, 1024, 4, 0})->Args({32768, 1024, 4, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<4, 1024>)->Args({32768, 1024, 4, 0})->Args({32768, 1024, 4, 4})
    ->Args({32768, 1024, 8, 4})->Args({32768, 1024, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<8, 1024>)->Args({32768, 1024, 8, 2})->Args({32768, 1024, 8, 4})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<4, 1024>)->Args({8192, 768, 4, 0})->Args({8192, 768, 4, 4})
    ->Args({8192, 768, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<4, 768>)->Args({8192, 768, 4, 0})->Args({8192, 768, 4, 4})
    ->Args({8192, 768, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<8, 768>)->Args({8192, 768, 8, 2})->Args({8192, 768, 8, 4})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<1, 4096>)->Args({32768, 4096, 8, 0})->Args({32768, 4096, 8, 4})
    ->Args({32768, 4096, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<2, 4096>)->Args({32768, 4096, 8, 2})->Args({32768, 4096, 16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm<1024, true>)->Args({8192, 768, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm<1024, false>)->Args({32768, 4096, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_matmul<false>)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_matmul<true>)->Args({8192, 768, 3072})->Args({8192, 4096, 4096})
    ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_prefill<ops::MatmulBias>)->Args({2016, 768, 2304})->Args({256, 768, 2304})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_prefill<ops::MatmulBiasGelu>)->Args({2016, 768, 3072})->Args({256, 768, 3072})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_prefill<ops::MatmulBiasResidual>)->Args({2016, 768, 768})->Args({2016, 3072, 768})
    ->Args({256, 768, 768})->Args({256, 3072, 768})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_cublas<false>)->Args({2016, 768, 2304})->Args({2016, 3072, 768})->Args({2016, 768, 3072})
    ->Args({2016, 768, 768})->Args({256, 768, 2304})->Args({256, 768, 3072})->Args({256, 768, 768})->Args({256, 3072, 768})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_matmul_bf16)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_cublas<false, kiln::bfloat16>)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_cublas<false>)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_cublas<true>)->Args({8192, 768, 3072})->Args({8192, 4096, 4096})
    ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_matmul_tf32<true>)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_cublas_tf32<true>)->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_matmul_tf32<false>)->Args({4096, 4096, 4096})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_cublas_tf32<false>)->Args({4096, 4096, 4096})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<64>)->Args({8, 12, 1024})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<128>)->Args({4, 16, 4096})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<64, 128, 8>)->Args({8, 12, 1024})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<128, 128, 8>)->Args({4, 16, 4096})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<64, 128, 8, 3>)->Args({8, 12, 1024})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_attention_prefill<128, 128, 8, 3>)->Args({4, 16, 4096})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_few_rows)
    ->Args({2, 768, 768, 0})->Args({2, 768, 3072, 0})->Args({2, 3072, 768, 0})
    ->Args({4, 768, 768, 0})->Args({4, 768, 3072, 0})->Args({4, 3072, 768, 0})
    ->Args({8, 768, 2304, 0})->Args({8, 768, 3072, 0})->Args({8, 3072, 768, 0})->Args({8, 768, 768, 0})
    ->Args({8, 768, 50257, 0})->Args({16, 3072, 768, 0})->Args({16, 768, 3072, 0})
    ->Args({8, 768, 2304, 1})->Args({8, 768, 3072, 1})->Args({8, 3072, 768, 1})->Args({8, 768, 768, 1})
    ->Args({8, 1600, 1600, 0})->Args({8, 6400, 1600, 0})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_many_rows, 32)
    ->Args({32, 768, 2304, 0})->Args({32, 768, 3072, 0})->Args({32, 3072, 768, 0})->Args({32, 768, 768, 0})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_many_rows, 64)
    ->Args({64, 768, 2304, 0})->Args({64, 768, 3072, 0})->Args({64, 3072, 768, 0})->Args({64, 768, 768, 0})
    ->Args({64, 768, 50257, 0})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
#define KILN_ATTENTION_DECODE(...)                                                                             \
  BENCHMARK_TEMPLATE(BM_attention_decode, __VA_ARGS__)                                                         \
      ->Args({1, 128})->Args({1, 192})->Args({1, 256})->Args({1, 512})->Args({8, 128})->Args({8, 192})         \
      ->Args({8, 256})->Args({8, 512})                                                                         \
      ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1)
KILN_ATTENTION_DECODE(ops::AttentionDecode<f16, 16, 64, 16>, 2); // the untuned GPT-2 kernel
KILN_ATTENTION_DECODE(ops::AttentionDecode<f16, 32, 64, 8>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecode<f16, 32, 64, 4>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeCluster<f16, 16, 64, 8>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeCluster<f16, 32, 64, 4>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeCluster<f16, 32, 64, 8>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeCluster<f16, 64, 64, 4>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeCluster<f16, 64, 64, 8>, 4);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 128, 64, 1>, 4);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 128, 64, 1>, 8);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 256, 64, 1>, 8);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 64, 64, 2>, 4);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 64, 64, 4>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 64, 64, 4>, 4);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 32, 64, 4>, 2);
KILN_ATTENTION_DECODE(ops::AttentionDecodeResident<f16, 32, 64, 8>, 2);
#undef KILN_ATTENTION_DECODE
using DE = ops::Epilogue;
BENCHMARK(BM_decode_rows<1, 768, false, DE::None>)->Arg(768)->Arg(3072)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<1, 768, false, DE::BiasResidual>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<1, 768, true, DE::BiasGelu>)->Arg(3072)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<1, 768, true, DE::Bias>)->Arg(2304)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<1, 3072, false, DE::BiasResidual>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<2, 768, false, DE::None>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<2, 768, true, DE::BiasGelu>)->Arg(3072)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<2, 3072, false, DE::BiasResidual>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<4, 768, false, DE::None>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<4, 768, true, DE::BiasGelu>)->Arg(3072)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<4, 3072, false, DE::BiasResidual>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<8, 768, false, DE::None>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<8, 768, true, DE::BiasGelu>)->Arg(3072)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_rows<8, 3072, false, DE::BiasResidual>)->Arg(768)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_mlp_fused<1>)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_mlp_two<1>)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_mlp_fused<2>)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_mlp_two<2>)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_cublas_few_rows)
    ->Args({8, 768, 2304})->Args({8, 768, 3072})->Args({8, 3072, 768})->Args({8, 768, 768})->Args({8, 768, 50257})
    ->Args({16, 3072, 768})->Args({16, 768, 3072})->Args({32, 768, 2304})->Args({32, 768, 3072})
    ->Args({32, 3072, 768})->Args({32, 768, 768})->Args({64, 768, 2304})->Args({64, 768, 3072})
    ->Args({64, 3072, 768})->Args({64, 768, 768})->Args({64, 768, 50257})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_decode_mlp)->Args({1, 768, 3072})->Args({64, 768, 3072})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);

int main(int argc, char **argv) {
  return tool::run("kiln_bench", [&] {
    std::string why;
    if (!cuda::available(&why))
      throw Error("no GPU: " + why);
    // On stderr and in the JSON context: stdout is the benchmark report.
    std::fprintf(stderr, "device: %s\n", cuda::device_name().c_str());
    benchmark::AddCustomContext("device", cuda::device_name());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
      return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  });
}
