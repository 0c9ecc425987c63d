//===- blocks.cpp - kiln's upper layers from a program outside its tree ---===//
//
// Uses the installed components as a user's project would: a library
// kernel (kiln::ops), a small decoder step wired from kiln::nn blocks with
// a kernel of its own, and a seeded GPT-2 (kiln::gpt2), all on the host
// CPU, each checked against a reference computed here. Exits with 1 on a
// mismatch or an error.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/model.hpp"
#include "kiln/gpt2/weights.hpp"
#include "kiln/nn/blocks.hpp"
#include "kiln/ops/softmax.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

using namespace kiln;

namespace {

int failures = 0;

void expect_close(const char *what, float got, double want, double tol) {
  if (std::abs(got - want) > tol * (1 + std::abs(want))) {
    if (failures++ < 5)
      std::fprintf(stderr, "%s: got %g, expected %g\n", what, double(got), want);
  }
}

/// The program's own kernel: y = x * scale + shift, element-wise over rows.
template <int BLOCK> struct ScaleShift {
  void operator()(Ptr<f32> x, Ptr<f32> y, F32 scale, F32 shift, I32 n) const {
    auto offs = program_id(0) * BLOCK + arange<BLOCK>();
    auto mask = offs < n;
    store(y + offs, load(x + offs, mask) * scale + shift, mask);
  }
};

std::vector<float> ramp(std::size_t n, float step) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = float(int(i % 17) - 8) * step;
  return v;
}

} // namespace

int main() {
  try {
    Target cpu = Target::cpu();
    CompileOptions options;
    options.use_cache = false; // a test leaves the user's kernel cache alone

    // 1. A library kernel: rows of 100 softmaxed by ops::Softmax.
    const int rows = 3, cols = 100;
    std::vector<float> x = ramp(rows * cols, 0.25f), y(x.size());
    auto softmax = compile<ops::Softmax<f32, 128>>(cpu, options);
    softmax.launch(Grid(rows), x.data(), y.data(), cols, cols, cols);
    for (int r = 0; r < rows; ++r) {
      double m = -1e30, s = 0;
      for (int c = 0; c < cols; ++c)
        m = std::max(m, double(x[r * cols + c]));
      for (int c = 0; c < cols; ++c)
        s += std::exp(double(x[r * cols + c]) - m);
      for (int c = 0; c < cols; ++c)
        expect_close("softmax", y[r * cols + c], std::exp(double(x[r * cols + c]) - m) / s, 1e-5);
    }

    // 2. Blocks and a kernel of the program's own, sharing a context:
    //    out = layernorm(x) * 2 + 1 @ W + b.
    const int64_t M = 2, K = 64, N = 48;
    nn::Context ctx(cpu);
    nn::Tensor<f32> xt(cpu, {M, K}, ramp(M * K, 0.5f)), normed(cpu, {M, K}), scaled(cpu, {M, K}),
        out(cpu, {M, N});
    std::vector<float> g(K, 1.0f), beta(K, 0.0f), w = ramp(K * N, 0.01f), b = ramp(N, 0.1f);
    nn::LayerNorm<f32> ln(ctx, nn::Tensor<f32>(cpu, {K}, g), nn::Tensor<f32>(cpu, {K}, beta));
    nn::Linear<f32, nn::Epilogue::Bias> linear(ctx, nn::Tensor<f32>(cpu, {K, N}, w), nn::Tensor<f32>(cpu, {N}, b));
    nn::Handle<ScaleShift<256>> scale = ctx.kernel<ScaleShift<256>>("scale_shift");
    ctx.compile();
    ln(ctx, xt, normed);
    scale(ctx, Grid(ceil_div(M * K, 256)), normed.data(), scaled.data(), 2.0f, 1.0f, int(M * K));
    linear(ctx, scaled, out);
    std::vector<float> xs = xt.to_host(), got = out.to_host();
    for (int64_t m = 0; m < M; ++m) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < K; ++k)
        mean += xs[m * K + k] / double(K);
      for (int64_t k = 0; k < K; ++k)
        var += (xs[m * K + k] - mean) * (xs[m * K + k] - mean) / double(K);
      for (int64_t n = 0; n < N; ++n) {
        double acc = b[n];
        for (int64_t k = 0; k < K; ++k)
          acc += ((xs[m * K + k] - mean) / std::sqrt(var + 1e-5) * 2 + 1) * w[k * N + n];
        expect_close("blocks", got[m * N + n], acc, 1e-4);
      }
    }

    // 3. GPT-2 from the program's own main: a small seeded model, greedy.
    gpt2::Config c;
    c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_ctx = 64;
    gpt2::Model model(gpt2::Weights::random(c, 7), cpu, gpt2::Precision::F32);
    std::vector<int32_t> prompt{464, 6125, 286};
    auto tokens = model.generate({prompt}, {.max_new_tokens = 4, .stop_at_eot = false});
    // The first new token is the argmax of the prompt's last logits.
    std::vector<float> logits = model.logits(prompt);
    std::size_t V = std::size_t(c.vocab_size), last = (prompt.size() - 1) * V, best = 0;
    for (std::size_t v = 1; v < V; ++v)
      if (logits[last + v] > logits[last + best])
        best = v;
    if (tokens.size() != 1 || tokens[0].size() != 4 || tokens[0][0] != int32_t(best)) {
      ++failures;
      std::fprintf(stderr, "gpt2: unexpected tokens\n");
    }
    std::printf("kiln_consumer_blocks: ops, nn and gpt2: %d mismatches\n", failures);
    return failures == 0 ? 0 : 1;
  } catch (const Error &e) {
    std::fprintf(stderr, "kiln_consumer_blocks: %s\n", e.what());
    return 1;
  }
}
