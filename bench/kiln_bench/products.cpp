//===- products.cpp - kiln_bench: products and prefill attention ----------===//
#include "common.hpp"

using namespace kiln;
using namespace kiln::microbench;

namespace {

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

} // namespace

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
