//===- test_gpu_runtime.cpp - streams, CUDA graphs, tuning on the GPU ------===//
#include <doctest/doctest.h>

#include "kiln/autotuner/autotune.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/reference.hpp"
#include "kiln/runtime/cuda.hpp"

#include <unistd.h>

using namespace kiln;

TEST_CASE("launches captured in a CUDA graph run on every replay") {
  auto k = compile<ops::VecAdd<f32, 256>>(Target::cuda(cuda::device_arch()));
  const int n = 1000;
  std::vector<float> x(n, 1.f), y(n, 2.f);
  cuda::DeviceBuffer<float> dx(x), dy(y), out(n);
  cuda::Stream stream;
  // out = x + y; then x' = out + y, twice, inside one graph.
  auto graph = cuda::Graph::capture(stream, [&] {
    k.launch(Grid(ceil_div(n, 256)), dx.data(), dy.data(), out.data(), n);
    k.launch(Grid(ceil_div(n, 256)), out.data(), dy.data(), dx.data(), n);
  });
  CHECK(graph.launches() == 2);
  stream.synchronize();
  CHECK(dx.download()[0] == 1.f); // capture runs nothing
  graph.replay(stream);
  stream.synchronize();
  CHECK(dx.download()[n - 1] == 5.f);
  graph.replay(stream);
  stream.synchronize();
  CHECK(dx.download()[n - 1] == 9.f);
}

TEST_CASE("the autotuner picks a working matmul configuration on the GPU") {
  const int M = 256, N = 256, K = 256;
  auto a = std::vector<half>(M * K), b = std::vector<half>(K * N);
  for (int i = 0; i < M * K; ++i) a[i] = half(float(i % 7) / 7.f - 0.5f);
  for (int i = 0; i < K * N; ++i) b[i] = half(float(i % 5) / 5.f - 0.5f);
  cuda::DeviceBuffer<half> da(a), db(b), dc(M * N);
  auto tuned = autotune<ops::Matmul<f16, 64, 64, 32>, ops::Matmul<f16, 128, 64, 32>>(
      Target::cuda(cuda::device_arch()), "test M=N=K=256", {4, 8}, [&](const auto &k) {
        using Kern = typename std::decay_t<decltype(k)>::kernel_type;
        k.launch(Grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN)), da.data(), db.data(),
                 dc.data(), M, N, K, K, N, N);
      });
  MESSAGE("winner " << tuned.label() << " after " << tuned.tuning_seconds() << " s");
  for (auto &r : tuned.results())
    MESSAGE("  " << r.label << ": " << r.ms << " ms " << r.error);
  tuned.run();
  auto c = dc.download();
  auto want = ref::matmul(a, b, M, N, K);
  double worst = 0;
  for (int i = 0; i < M * N; ++i)
    worst = std::max(worst, std::abs(double(float(c[i])) - want[i]));
  CHECK(worst < 2e-2);
}

TEST_CASE("a candidate timed as a chain runs as one captured graph of that many launches") {
  const int n = 1 << 16;
  cuda::DeviceBuffer<float> x(std::vector<float>(n, 1.f)), y(std::vector<float>(n, 2.f)), out(n);
  int launches = 0;
  auto launch = [&](const auto &k) {
    using Kern = typename std::decay_t<decltype(k)>::kernel_type;
    ++launches;
    k.launch(Grid(ceil_div(n, Kern::BLOCK)), x.data(), y.data(), out.data(), n);
  };
  auto key = "chain test " + std::to_string(::getpid());
  auto tuned = autotune<ops::VecAdd<f32, 256>, ops::VecAdd<f32, 1024>>(Target::cuda(cuda::device_arch()), key,
                                                                       {4}, launch, {}, TuneTiming{8});
  REQUIRE(tuned.results().size() == 2);
  for (auto &r : tuned.results()) {
    MESSAGE(r.label << ": " << r.ms * 1e3 << " us a launch " << r.error);
    CHECK(r.ms > 0);
    CHECK(r.ms < 1.0);
  }
  CHECK(launches == 2 * (1 + 8)); // each: one launch before the capture, eight captured
  tuned.run();
  CHECK(out.download()[n - 1] == 3.f);
}

TEST_CASE("tensor-core matmul over warp layouts with odd and even mma tile counts") {
  // 16x32 tiles on 4 warps: each warp owns one 16x8 mma tile (odd count of B tiles);
  // 64x64 on 4 warps: 2x4 mma tiles per warp (pairs of B tiles through ldmatrix.x4.trans).
  const int M = 80, N = 96, K = 160;
  std::vector<half> a(M * K), b(K * N);
  for (int i = 0; i < M * K; ++i) a[i] = half(float((i * 7) % 13) / 13.f - 0.5f);
  for (int i = 0; i < K * N; ++i) b[i] = half(float((i * 5) % 11) / 11.f - 0.5f);
  auto want = ref::matmul(a, b, M, N, K);
  cuda::DeviceBuffer<half> da(a), db(b);
  auto run = [&](const auto &k, int bm, int bn) {
    cuda::DeviceBuffer<half> dc(M * N);
    k.launch(Grid(ceil_div(M, bm), ceil_div(N, bn)), da.data(), db.data(), dc.data(), M, N, K, K, N, N);
    auto c = dc.download();
    double worst = 0;
    for (int i = 0; i < M * N; ++i)
      worst = std::max(worst, std::abs(double(float(c[i])) - want[i]));
    return worst;
  };
  Target t = Target::cuda(cuda::device_arch());
  CHECK(run(compile<ops::Matmul<f16, 16, 32, 32>>(t), 16, 32) < 2e-2);
  CHECK(run(compile<ops::Matmul<f16, 64, 64, 32>>(t), 64, 64) < 2e-2);
  CompileOptions eight;
  eight.num_warps = 8;
  CHECK(run(compile<ops::Matmul<f16, 64, 64, 32>>(t, eight), 64, 64) < 2e-2);
}

namespace {
template <class K> struct HasBias : std::false_type {};
template <class T, int BM, int BN, int BK>
struct HasBias<ops::MatmulBiasGelu<T, BM, BN, BK>> : std::true_type {};

/// Worst absolute error of kernel `K` (a Matmul or MatmulBiasGelu) against
/// the reference on an (M, N, K) problem, compiled with `warps` and `stages`.
template <class Kern, class T>
double matmul_error(int M, int N, int K, int warps, int stages) {
  std::vector<T> a(std::size_t(M) * K), b(std::size_t(K) * N), bias(N);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(float((i * 7) % 13) / 13.f - 0.5f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(float((i * 5) % 11) / 11.f - 0.5f);
  for (int i = 0; i < N; ++i) bias[i] = T(float(i % 9) / 9.f - 0.5f);
  CompileOptions options;
  options.num_warps = warps;
  options.num_stages = stages;
  auto k = compile<Kern>(Target::cuda(cuda::device_arch()), options);
  cuda::DeviceBuffer<T> da(a), db(b), dbias(bias), dc(std::size_t(M) * N);
  Grid grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN));
  std::vector<double> want;
  if constexpr (HasBias<Kern>::value) {
    k.launch(grid, da.data(), db.data(), dbias.data(), dc.data(), M, N, K, K, N, N);
    want = ref::matmul(a, b, M, N, K, &bias);
  } else {
    k.launch(grid, da.data(), db.data(), dc.data(), M, N, K, K, N, N);
    want = ref::matmul(a, b, M, N, K);
  }
  auto c = dc.download();
  double worst = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    worst = std::max(worst, std::abs(double(float(c[i])) - want[i]));
  return worst;
}
} // namespace

namespace {
/// Worst absolute error of MatmulBiasResidual `Kern` against the reference,
/// with the residual read from `c` itself (in place, as GPT-2 adds to its
/// residual stream) or from a buffer of its own.
template <class Kern, class T> double residual_error(int M, int N, int K, int warps, bool inPlace) {
  std::vector<T> a(std::size_t(M) * K), b(std::size_t(K) * N), bias(N), res(std::size_t(M) * N);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(float((i * 7) % 13) / 13.f - 0.5f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(float((i * 5) % 11) / 11.f - 0.5f);
  for (int i = 0; i < N; ++i) bias[i] = T(float(i % 9) / 9.f - 0.5f);
  for (std::size_t i = 0; i < res.size(); ++i) res[i] = T(float((i * 3) % 17) / 17.f - 0.5f);
  CompileOptions options;
  options.num_warps = warps;
  options.num_stages = 3;
  auto k = compile<Kern>(Target::cuda(cuda::device_arch()), options);
  cuda::DeviceBuffer<T> da(a), db(b), dbias(bias), dres(res), dc(res);
  Grid grid(ceil_div(M, Kern::BM), ceil_div(N, Kern::BN));
  k.launch(grid, da.data(), db.data(), dbias.data(), inPlace ? dc.data() : dres.data(), dc.data(), M, N, K, K, N, N);
  auto want = ref::matmul(a, b, M, N, K);
  auto c = dc.download();
  double worst = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    worst = std::max(worst, std::abs(double(float(c[i])) -
                                     (want[i] + double(float(bias[i % N])) + double(float(res[i])))));
  return worst;
}
} // namespace

TEST_CASE("a product with bias and residual, in place or not, matches the reference on ragged shapes") {
  // The bias is loaded in the accumulator's column slice and the residual in
  // its accumulator layout, two columns per load: N = 263 makes every other
  // row's pairs misaligned (element loads); K = 135 rows are not 16-byte
  // aligned either (no TMA).
  for (auto [N, K] : {std::pair{264, 136}, std::pair{263, 135}}) {
    CAPTURE(N);
    for (bool inPlace : {false, true}) {
      CAPTURE(inPlace);
      CHECK(residual_error<ops::MatmulBiasResidual<f16, 64, 128, 64>, half>(200, N, K, 4, inPlace) < 2e-2);
      CHECK(residual_error<ops::MatmulBiasResidual<f16, 128, 128, 64>, half>(200, N, K, 8, inPlace) < 2e-2);
      CHECK(residual_error<ops::MatmulBiasResidual<bf16, 64, 128, 64>, bfloat16>(200, N, K, 4, inPlace) < 5e-2);
      CHECK(residual_error<ops::MatmulBiasResidual<f16, 32, 64, 64>, half>(200, N, K, 4, inPlace) < 2e-2);
    }
  }
}

TEST_CASE("matmul over block sizes, warps and pipeline stages matches the reference") {
  // K = 136: the last K block is partial; K = 135: rows are not 16-byte
  // aligned, so copies fall back to element loads. 128-wide blocks on 4 warps
  // hold one element of each 128-element vector per thread.
  for (int K : {136, 135}) {
    CAPTURE(K);
    for (int stages : {1, 2, 3, 4}) {
      CAPTURE(stages);
      CHECK(matmul_error<ops::Matmul<f16, 128, 128, 32>, half>(200, 264, K, 4, stages) < 2e-2);
      CHECK(matmul_error<ops::Matmul<f16, 128, 64, 32>, half>(200, 264, K, 8, stages) < 2e-2);
      CHECK(matmul_error<ops::MatmulBiasGelu<f16, 128, 128, 32>, half>(200, 264, K, 8, stages) < 2e-2);
      CHECK(matmul_error<ops::MatmulBiasGelu<bf16, 64, 128, 64>, bfloat16>(200, 264, K, 4, stages) < 5e-2);
      CHECK(matmul_error<ops::MatmulBiasGelu<f16, 32, 32, 32>, half>(200, 264, K, 4, stages) < 2e-2);
    }
  }
}
