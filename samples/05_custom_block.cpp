//===- 05_custom_block.cpp - lesson 5: your own kernel as a decoder block --===//
//
// What this teaches: kiln's transformer blocks (kiln/nn/blocks.hpp) are
// small classes around typed kernel handles, and yours can sit beside them.
// This lesson writes a fused SwiGLU kernel, `h = silu(x @ Wg) * (x @ Wu)`
// (both products share one K loop: one launch, the gate never stored),
// wraps it as a block, `SwiGluMlp`, with the library's LayerNorm and Linear
// around it, and builds a small decoder from the library's embedding,
// attention and head and this MLP. It runs a prompt and a few greedy decode
// steps (on the GPU when there is one, else on the CPU) and checks the
// logits and tokens against the same network computed in double on the host.
//
//===----------------------------------------------------------------------===//
#include "lesson.hpp"

#include "kiln/nn/blocks.hpp"

#include <cmath>
#include <random>

using namespace kiln;
using nn::Epilogue;

// ---------------------------------------------------------------------------
// The kernel: h[M, N] = silu(a @ wg) * (a @ wu), a [M, K], wg and wu [K, N].
// ---------------------------------------------------------------------------
template <class T, int BM_, int BN_, int BK> struct SwiGlu {
  static constexpr int BM = BM_, BN = BN_;
  void operator()(Ptr<T> a, Ptr<T> wg, Ptr<T> wu, Ptr<T> h, I32 M, I32 N, I32 K) const {
    auto rows = expand_dims<1>(program_id(0) * BM + arange<BM>()); // (BM, 1)
    auto cols = expand_dims<0>(program_id(1) * BN + arange<BN>()); // (1, BN)
    auto rk = arange<BK>();
    using Acc = Tile<f32, BM, BN>;
    auto [g, u] = for_range(0, K, BK, std::tuple{zeros<f32, BM, BN>(), zeros<f32, BM, BN>()},
                            [&](I32 k0, Acc g, Acc u) {
                              auto ka = expand_dims<0>(k0 + rk); // (1, BK)
                              auto kb = expand_dims<1>(k0 + rk); // (BK, 1)
                              auto at = load(a + rows * K + ka, (rows < M) & (ka < K), 0);
                              auto gt = load(wg + kb * N + cols, (kb < K) & (cols < N), 0);
                              auto ut = load(wu + kb * N + cols, (kb < K) & (cols < N), 0);
                              return std::tuple{dot(at, gt, g), dot(at, ut, u)};
                            });
    auto out = g / (1.0f + exp(-g)) * u; // silu(g) * u
    store(h + rows * N + cols, cast<T>(out), (rows < M) & (cols < N));
  }
};

// ---------------------------------------------------------------------------
// The block: x += down(swiglu(layernorm(x))), shapes checked like the
// library's blocks, the kernel asked of the context like theirs.
// ---------------------------------------------------------------------------
template <class D> class SwiGluMlp {
  using K = SwiGlu<D, 32, 32, 16>;

public:
  SwiGluMlp(nn::Context &ctx, nn::LayerNorm<D> ln, nn::Tensor<D> wg, nn::Tensor<D> wu,
            nn::Linear<D, Epilogue::BiasResidual> down, int64_t max_rows)
      : ln_(std::move(ln)), wg_(std::move(wg)), wu_(std::move(wu)), down_(std::move(down)),
        hidden_(ctx.target(), {max_rows, wg_.dim(1)}),
        kernel_(ctx.kernel<K>("swiglu")) {
    nn::expect(wg_, {ln_.features(), nn::kAny}, "SwiGluMlp", "wg");
    nn::expect(wu_, {ln_.features(), wg_.dim(1)}, "SwiGluMlp", "wu");
    if (down_.in_features() != wg_.dim(1) || down_.out_features() != ln_.features())
      throw Error("SwiGluMlp: the down projection is " + down_.name());
  }

  void operator()(nn::Context &ctx, const nn::Tensor<D> &x, const nn::Workspace<D> &ws) const {
    int64_t R = x.dim(0), C = ln_.features(), H = wg_.dim(1);
    nn::Tensor<D> normed = ws.normed.rows(0, R), h = hidden_.rows(0, R);
    ln_(ctx, x, normed);
    kernel_(ctx, Grid(ceil_div(R, K::BM), ceil_div(H, K::BN)), normed.data(), wg_.data(),
            wu_.data(), h.data(), int(R), int(H), int(C));
    down_(ctx, h, x, x);
  }

  const Kernel<K> &kernel() const { return kernel_.kernel(); }

private:
  nn::LayerNorm<D> ln_;
  nn::Tensor<D> wg_, wu_;
  nn::Linear<D, Epilogue::BiasResidual> down_;
  nn::Tensor<D> hidden_;
  nn::Handle<K> kernel_;
};

// ---------------------------------------------------------------------------
// The decoder and its reference.
// ---------------------------------------------------------------------------
constexpr int64_t V = 512, C = 64, Heads = 4, H = 128, Layers = 2, T = 64;

/// Host parameters, drawn from a seeded generator.
struct Params {
  std::vector<float> wte, wpe, lnfw, lnfb;
  struct Layer {
    std::vector<float> ln1w, ln1b, wqkv, bqkv, wproj, bproj, ln2w, ln2b, wg, wu, wdown, bdown;
  };
  std::vector<Layer> layers;
  Params() {
    std::mt19937 gen(5);
    auto draw = [&](int64_t n, float scale, float mean = 0) {
      std::uniform_real_distribution<float> u(mean - scale, mean + scale);
      std::vector<float> v(static_cast<std::size_t>(n));
      for (float &x : v)
        x = u(gen);
      return v;
    };
    wte = draw(V * C, 0.3f);
    wpe = draw(T * C, 0.5f);
    lnfw = draw(C, 0.1f, 1);
    lnfb = draw(C, 0.1f);
    for (int l = 0; l < Layers; ++l)
      layers.push_back({draw(C, 0.1f, 1), draw(C, 0.1f), draw(C * 3 * C, 0.15f), draw(3 * C, 0.05f),
                        draw(C * C, 0.1f), draw(C, 0.05f), draw(C, 0.1f, 1), draw(C, 0.1f),
                        draw(C * H, 0.15f), draw(C * H, 0.15f), draw(H * C, 0.1f), draw(C, 0.05f)});
  }
};

/// The logits of every position of `tokens`, in double.
std::vector<double> reference(const Params &p, const std::vector<int32_t> &tokens) {
  const int64_t n = int64_t(tokens.size());
  using Rows = std::vector<double>;
  auto ln = [&](const Rows &x, const std::vector<float> &w, const std::vector<float> &b) {
    Rows y(x.size());
    for (int64_t r = 0; r < n; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c)
        mean += x[std::size_t(r * C + c)] / C;
      for (int64_t c = 0; c < C; ++c)
        var += std::pow(x[std::size_t(r * C + c)] - mean, 2) / C;
      for (int64_t c = 0; c < C; ++c)
        y[std::size_t(r * C + c)] =
            (x[std::size_t(r * C + c)] - mean) / std::sqrt(var + 1e-5) * w[std::size_t(c)] + b[std::size_t(c)];
    }
    return y;
  };
  auto matmul = [&](const Rows &x, const std::vector<float> &w, int64_t K, int64_t N) {
    Rows y(std::size_t(n * N), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < N; ++c)
          y[std::size_t(r * N + c)] += x[std::size_t(r * K + k)] * w[std::size_t(k * N + c)];
    return y;
  };
  Rows x(std::size_t(n * C));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < C; ++c)
      x[std::size_t(r * C + c)] = p.wte[std::size_t(tokens[std::size_t(r)] * C + c)] + p.wpe[std::size_t(r * C + c)];
  const int64_t hd = C / Heads;
  for (const Params::Layer &l : p.layers) {
    Rows qkv = matmul(ln(x, l.ln1w, l.ln1b), l.wqkv, C, 3 * C);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 3 * C; ++c)
        qkv[std::size_t(r * 3 * C + c)] += l.bqkv[std::size_t(c)];
    Rows att(std::size_t(n * C));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < Heads; ++h) {
        std::vector<double> s(std::size_t(t + 1));
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t i = 0; i < hd; ++i)
            s[std::size_t(j)] += qkv[std::size_t(t * 3 * C + h * hd + i)] * qkv[std::size_t(j * 3 * C + C + h * hd + i)];
          s[std::size_t(j)] /= std::sqrt(double(hd));
          m = std::max(m, s[std::size_t(j)]);
        }
        for (double &v : s)
          sum += (v = std::exp(v - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < hd; ++i)
            att[std::size_t(t * C + h * hd + i)] += s[std::size_t(j)] / sum * qkv[std::size_t(j * 3 * C + 2 * C + h * hd + i)];
      }
    Rows proj = matmul(att, l.wproj, C, C);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] += proj[i] + l.bproj[i % C];
    Rows normed = ln(x, l.ln2w, l.ln2b);
    Rows g = matmul(normed, l.wg, C, H), u = matmul(normed, l.wu, C, H);
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    Rows down = matmul(g, l.wdown, H, C);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] += down[i] + l.bdown[i % C];
  }
  return matmul(ln(x, p.lnfw, p.lnfb), nn::transpose(p.wte, V, C), C, V);
}

int main(int argc, char **argv) {
  return lesson::run(argc, argv, "lesson 5: a custom kernel as a decoder block", [](const lesson::Options &o) {
    Target target = cuda::available() ? Target::cuda(cuda::device_arch()) : Target::cpu();
    using D = f32;
    Params p;
    nn::Context ctx(target);
    auto tensor = [&](const std::vector<float> &v, nn::Shape s) { return nn::Tensor<D>(target, s, v); };

    // The decoder: library blocks and ours.
    nn::Tensor<D> wte = tensor(p.wte, {V, C});
    nn::Embedding<D> embedding(ctx, wte, tensor(p.wpe, {T, C}));
    struct Layer {
      nn::CausalSelfAttention<D> attn;
      SwiGluMlp<D> mlp;
    };
    std::vector<Layer> layers;
    for (const Params::Layer &l : p.layers) {
      nn::Linear<D, Epilogue::BiasResidual> proj(ctx, tensor(l.wproj, {C, C}), tensor(l.bproj, {C}),
                                                 tensor(nn::transpose(l.wproj, C, C), {C, C}), {});
      nn::CausalSelfAttention<D> attn(
          ctx, nn::LayerNorm<D>(ctx, tensor(l.ln1w, {C}), tensor(l.ln1b, {C})),
          tensor(l.wqkv, {C, 3 * C}), tensor(l.bqkv, {3 * C}),
          tensor(nn::transpose(l.wqkv, C, 3 * C), {3 * C, C}), std::move(proj), int(Heads),
          nn::KvCache<D>(target, 1, T, C));
      nn::Linear<D, Epilogue::BiasResidual> down(ctx, tensor(l.wdown, {H, C}), tensor(l.bdown, {C}));
      SwiGluMlp<D> mlp(ctx, nn::LayerNorm<D>(ctx, tensor(l.ln2w, {C}), tensor(l.ln2b, {C})),
                       tensor(l.wg, {C, H}), tensor(l.wu, {C, H}), std::move(down), T);
      layers.push_back({std::move(attn), std::move(mlp)});
    }
    nn::LmHead<D> head(ctx, nn::LayerNorm<D>(ctx, tensor(p.lnfw, {C}), tensor(p.lnfb, {C})),
                       tensor(nn::transpose(p.wte, V, C), {C, V}), wte);
    nn::Sampler<D> sampler(ctx);
    ctx.compile();
    std::printf("%zu kernels compiled for %s, in %.2f s summed over cores\n", ctx.kernels().size(),
                target.str().c_str(), ctx.compile_seconds());

    // Activations.
    nn::Workspace<D> ws(target, T, C, 1, Heads, layers.front().attn.splits(), C / Heads);
    nn::Tensor<D> x(target, {T, C}), logits(target, {T, V});
    nn::Tensor<i32> next(target, {1}), pos(target, {1});

    // The prompt, in one prefill: every position's logits.
    std::vector<int32_t> tokens{17, 301, 5, 88, 450, 2, 99, 63, 7};
    int64_t P = int64_t(tokens.size());
    std::vector<int32_t> at(tokens.size());
    for (std::size_t i = 0; i < at.size(); ++i)
      at[i] = int32_t(i);
    nn::Packing packing{nn::Tensor<i32>(target, {P}, std::vector<int32_t>(tokens.size(), 0)),
                        nn::Tensor<i32>(target, {P}, at),
                        nn::Tensor<i32>(target, {1}, std::vector<int32_t>{0}),
                        nn::Tensor<i32>(target, {1}, std::vector<int32_t>{int32_t(P)}), 1, int(P)};
    nn::Tensor<D> xp = x.rows(0, P);
    embedding(ctx, nn::Tensor<i32>(target, {P}, tokens), packing.pos, xp);
    for (const Layer &l : layers) {
      l.attn.prefill(ctx, xp, packing, ws.rows(P));
      l.mlp(ctx, xp, ws.rows(P));
    }
    head(ctx, xp, ws.normed.rows(0, P), logits.rows(0, P));
    std::vector<float> got = logits.rows(0, P).to_host();
    std::vector<double> want = reference(p, tokens);
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    std::printf("prefill of %lld tokens: max |logit - reference| = %.2e\n", (long long)P, worst);

    // Greedy decode steps: one row, the decode kernels, the cache. Each
    // step's logits are checked too, and its token against the reference's.
    pos.copy_from(std::vector<int32_t>{int32_t(P)});
    sampler(ctx, logits.rows(P - 1, 1), next, pos, 0, {});
    auto argmax = [](std::vector<double>::const_iterator row) {
      return int32_t(std::max_element(row, row + V) - row);
    };
    std::vector<int32_t> context = tokens, generated{next.to_host()[0]},
                         expected{argmax(want.cbegin() + (P - 1) * V)};
    double worstDecode = 0;
    for (int step = 0; step < 6; ++step) {
      context.push_back(generated.back());
      nn::Tensor<D> x1 = x.rows(0, 1);
      embedding(ctx, next, pos, x1);
      for (const Layer &l : layers) {
        l.attn.decode(ctx, x1, pos, ws.rows(1));
        l.mlp(ctx, x1, ws.rows(1));
      }
      head(ctx, x1, ws.normed.rows(0, 1), logits.rows(0, 1));
      sampler(ctx, logits.rows(0, 1), next, pos, 1, {});
      std::vector<float> row = logits.rows(0, 1).to_host();
      std::vector<double> ref = reference(p, context);
      auto last = ref.cbegin() + std::ptrdiff_t((context.size() - 1) * V);
      for (int64_t v = 0; v < V; ++v)
        worstDecode = std::max(worstDecode, std::abs(double(row[std::size_t(v)]) - last[v]));
      generated.push_back(next.to_host()[0]);
      expected.push_back(argmax(last));
    }
    std::printf("decode steps: max |logit - reference| = %.2e\n", worstDecode);
    std::printf("greedy tokens:    ");
    for (int32_t t : generated)
      std::printf(" %d", t);
    std::printf("\nreference tokens: ");
    for (int32_t t : expected)
      std::printf(" %d", t);
    std::printf("\n");
    if (!o.stages.empty())
      lesson::show_ir(o, layers.front().mlp.kernel());
    return worst < 1e-3 && worstDecode < 1e-3 && generated == expected ? 0 : 1;
  });
}
