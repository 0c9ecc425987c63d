//===- test_ops_cpu.cpp - the kernel library against its references, CPU -===//
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "../support/check.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/reference.hpp"
#include "kiln/ops/softmax.hpp"

using namespace kiln;

namespace {
const Target kCpu = Target::cpu();

template <class T> void check(const std::vector<T> &got, const std::vector<double> &want,
                              double atol, double rtol) {
  auto c = test::compare(got, want, atol, rtol);
  INFO(c.report);
  CHECK(c.ok());
}
} // namespace

TEST_CASE_TEMPLATE("vec_add matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  auto k = compile<ops::VecAdd<D, 256>>(kCpu);
  for (int n : {1, 255, 256, 1000, 4097}) {
    CAPTURE(n);
    auto x = test::random_vector<T>(n, 1), y = test::random_vector<T>(n, 2);
    std::vector<T> out(n, T(-7.0f));
    k.launch(Grid(ceil_div(n, 256)), x.data(), y.data(), out.data(), n);
    double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
    check(out, ref::vec_add(x, y), tol, tol);
  }
}

TEST_CASE_TEMPLATE("softmax matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
  auto looped = compile<ops::Softmax<D, 128>>(kCpu);
  auto one_pass = compile<ops::Softmax<D, 512, true>>(kCpu);
  for (auto [rows, cols] : {std::pair{1, 1}, {3, 100}, {4, 128}, {5, 300}, {2, 512}, {7, 1000}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    auto x = test::random_vector<T>(std::size_t(rows) * cols, 3, -8, 8);
    auto want = ref::softmax(x, rows, cols);
    std::vector<T> y(x.size(), T(-1.0f));
    looped.launch(Grid(rows), x.data(), y.data(), cols, cols, cols);
    check(y, want, tol, tol);
    if (cols <= 512) {
      std::fill(y.begin(), y.end(), T(-1.0f));
      one_pass.launch(Grid(rows), x.data(), y.data(), cols, cols, cols);
      check(y, want, tol, tol);
    }
  }
}

TEST_CASE_TEMPLATE("layernorm matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  double tol = std::is_same_v<T, half> ? 1e-2 : 1e-5;
  auto looped = compile<ops::LayerNorm<D, 128>>(kCpu);
  auto one_pass = compile<ops::LayerNorm<D, 1024, true>>(kCpu);
  for (auto [rows, n] : {std::pair{1, 1}, {3, 100}, {4, 128}, {2, 768}, {3, 1000}}) {
    CAPTURE(rows);
    CAPTURE(n);
    auto x = test::random_vector<T>(std::size_t(rows) * n, 4, -3, 5);
    auto w = test::random_vector<T>(n, 5), b = test::random_vector<T>(n, 6);
    auto want = ref::layernorm(x, w, b, rows, n, 1e-5);
    std::vector<T> y(x.size());
    looped.launch(Grid(rows), x.data(), w.data(), b.data(), y.data(), n, n, 1e-5);
    check(y, want, tol, tol);
    one_pass.launch(Grid(rows), x.data(), w.data(), b.data(), y.data(), n, n, 1e-5);
    check(y, want, tol, tol);
  }
}

TEST_CASE_TEMPLATE("matmul and matmul+bias+gelu match the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  auto mm = compile<ops::Matmul<D, 32, 32, 16>>(kCpu);
  auto mbg = compile<ops::MatmulBiasGelu<D, 32, 32, 16>>(kCpu);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {32, 32, 16}, {33, 65, 17}, {64, 96, 128},
                         {70, 50, 100}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    auto a = test::random_vector<T>(std::size_t(M) * K, 7);
    auto b = test::random_vector<T>(std::size_t(K) * N, 8);
    auto bias = test::random_vector<T>(N, 9);
    double tol = std::is_same_v<T, half> ? 1e-2 : 1e-5;
    std::vector<T> c(std::size_t(M) * N, T(-5.0f));
    Grid grid(ceil_div(M, 32), ceil_div(N, 32));
    mm.launch(grid, a.data(), b.data(), c.data(), M, N, K, K, N, N);
    check(c, ref::matmul(a, b, M, N, K), tol, tol);
    std::fill(c.begin(), c.end(), T(-5.0f));
    mbg.launch(grid, a.data(), b.data(), bias.data(), c.data(), M, N, K, K, N, N);
    check(c, ref::matmul(a, b, M, N, K, &bias), tol, tol);
  }
}
