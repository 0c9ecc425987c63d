//===- 03_matmul_bias_gelu.cpp - lesson 3: tiled matmul with an epilogue --===//
//
// What this teaches: 2-D tiles come from 1-D ranges with `expand_dims` and
// broadcasting, `for_range` carries the f32 accumulator through the K loop,
// `dot` multiplies (BM, BK) x (BK, BN) tiles, and the bias add and GELU run on
// the accumulator before the single store: one kernel instead of three.
//
//===----------------------------------------------------------------------===//
#include "lesson.hpp"

#include "kiln/ops/matmul.hpp"
#include "kiln/ops/reference.hpp"

#include <cmath>

using namespace kiln;

int main(int argc, char **argv) {
  return lesson::run(argc, argv, "lesson 3: matmul + bias + gelu", [](const lesson::Options &o) {
    // The kernel lives in ops/matmul.hpp; read it alongside this lesson.
    auto k = compile<ops::MatmulBiasGelu<f32, 32, 32, 16>>(Target::cpu());
    const int M = 100, N = 70, K = 48; // none a multiple of its block
    std::vector<float> a(M * K), b(K * N), bias(N), c(M * N);
    for (int i = 0; i < M * K; ++i) a[i] = float((i * 7) % 13) / 13.f - 0.5f;
    for (int i = 0; i < K * N; ++i) b[i] = float((i * 5) % 11) / 11.f - 0.5f;
    for (int i = 0; i < N; ++i) bias[i] = float(i % 5) / 5.f - 0.4f;
    k.launch(Grid(ceil_div(M, 32), ceil_div(N, 32)), a.data(), b.data(), bias.data(), c.data(), M,
             N, K, K, N, N);
    auto want = ref::matmul(a, b, M, N, K, &bias);
    double worst = 0;
    for (int i = 0; i < M * N; ++i)
      worst = std::max(worst, std::fabs(double(c[i]) - want[i]));
    std::printf("C = gelu(A @ B + bias), %dx%dx%d on a %ux%u grid: c[0] = %.5f, max abs error %.2e\n",
                M, N, K, ceil_div(M, 32), ceil_div(N, 32), c[0], worst);
    lesson::show_ir(o, k);
    return worst < 1e-4 ? 0 : 1;
  });
}
