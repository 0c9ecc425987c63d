//===- test_nn.cpp - kiln::nn tensors and blocks against references --------===//
//
// Compiled once, linked for the CPU (f32, in CI) and for the GPU (f32 and
// f16). Each block runs on a prefill's many rows and on a decode step's
// few (where it launches its decode-step kernels) and is compared with a
// double-precision reference; wiring mistakes are refused with a message.
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include "support/target.hpp"
#include "support/temp_dir.hpp"
#include "kiln/nn/blocks.hpp"
#include "kiln/ops/reference.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

using namespace kiln;
using nn::Epilogue;

namespace {
using test::target;

std::vector<float> randoms(std::size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(gen);
  return v;
}

nn::Tensor<f32> tensor(nn::Shape shape, uint32_t seed, float scale = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v = randoms(std::size_t(n), seed, scale);
  return nn::Tensor<f32>(target(), std::move(shape), v);
}

void checkClose(const std::vector<float> &got, const std::vector<double> &want, double tol) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
  CHECK(worst < tol);
}

/// out = E(x @ w) computed in double.
std::vector<double> reference(const std::vector<float> &x, const std::vector<float> &w,
                              const std::vector<float> &bias, const std::vector<float> *res,
                              Epilogue e, int M, int N, int K) {
  std::vector<double> out = ref::matmul(x, w, M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double &v = out[std::size_t(m) * N + n];
      if (e != Epilogue::None)
        v += bias[std::size_t(n)];
      if (e == Epilogue::BiasGelu)
        v = ref::gelu_tanh(v);
      if (e == Epilogue::BiasResidual)
        v += (*res)[std::size_t(m) * N + n];
    }
  return out;
}

template <Epilogue E> void checkLinear(int64_t K, int64_t N, std::initializer_list<int64_t> rows) {
  nn::Context ctx(target());
  nn::Tensor<f32> w = tensor({K, N}, 1, 0.1f), b = tensor({N}, 2);
  std::vector<float> wHost = w.to_host();
  nn::Tensor<f32> wt(target(), {N, K}, nn::transpose(wHost, K, N));
  nn::Linear<f32, E> linear(ctx, w, E == Epilogue::None ? nn::Tensor<f32>{} : b, wt, {});
  ctx.compile();
  for (int64_t M : rows) {
    CAPTURE(M);
    nn::Tensor<f32> x = tensor({M, K}, 3), out(target(), {M, N});
    std::vector<float> res;
    if constexpr (E == Epilogue::BiasResidual) {
      nn::Tensor<f32> r = tensor({M, N}, 4);
      res = r.to_host();
      linear(ctx, x, r, out);
    } else {
      linear(ctx, x, out);
    }
    CHECK(linear.decodes(M) == (M <= nn::kDecodeRows));
    checkClose(out.to_host(), reference(x.to_host(), wHost, b.to_host(), &res, E, int(M), int(N), int(K)),
               1e-4);
  }
}

} // namespace

TEST_CASE("nn::Tensor: shapes, row views and copies") {
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  nn::Tensor<f32> t(target(), {3, 2}, v);
  CHECK(t.numel() == 6);
  CHECK(t.dim(-1) == 2);
  nn::Tensor<f32> r = t.rows(1, 2);
  CHECK(r.shape() == nn::Shape{2, 2});
  CHECK(r.to_host() == std::vector<float>{3, 4, 5, 6});
  r.rows(1, 1).copy_from(std::vector<float>{7, 8});
  CHECK(t.to_host() == std::vector<float>{1, 2, 3, 4, 7, 8}); // a view writes through
  CHECK(t.reshape({6}).dim(0) == 6);
  CHECK_THROWS_WITH_AS(t.rows(2, 2), "nn::Tensor: rows [2, 4) of a tensor of shape [3, 2]", Error);
  CHECK_THROWS_WITH_AS(t.reshape({4}), "nn::Tensor: cannot reshape [3, 2] to [4]", Error);
  CHECK_THROWS_WITH_AS(t.copy_from(std::vector<float>{1}),
                       "nn::Tensor: copying 1 values into a tensor of shape [3, 2]", Error);
  CHECK(t.like().to_host() == std::vector<float>(6, 0.0f));
}

TEST_CASE("nn::Linear matches the reference with every epilogue, prefill and decode rows") {
  // Decode-step kernels (1 row; up to 8 rows) for K = 64 and 256; 33 and 40
  // rows take the prefill tiles. Without a decode copy of the weight every
  // row count takes the prefill tiles.
  checkLinear<Epilogue::None>(64, 96, {1, 2, 5, 40});
  checkLinear<Epilogue::Bias>(64, 96, {1, 8, 40});
  checkLinear<Epilogue::BiasGelu>(64, 160, {1, 3, 40});
  checkLinear<Epilogue::BiasResidual>(256, 64, {1, 7, 33});
  // The decode kernels take K as a value: any width runs them, here 48
  // (a ragged last chunk of K) and 1000.
  checkLinear<Epilogue::Bias>(48, 40, {1, 3, 8});
  checkLinear<Epilogue::BiasResidual>(1000, 24, {1, 2});
  nn::Context ctx(target());
  nn::Linear<f32, Epilogue::Bias> odd(ctx, tensor({48, 40}, 5), tensor({40}, 6));
  CHECK_FALSE(odd.decodes(1)); // no decode copy of the weight: the prefill tiles
}

TEST_CASE("nn::NormLinear fuses the layernorm into its decode kernels and agrees with the two steps") {
  const int64_t K = 64, N = 256;
  nn::Context ctx(target());
  nn::Tensor<f32> lnw = tensor({K}, 7), lnb = tensor({K}, 8), w = tensor({K, N}, 9, 0.1f),
                  b = tensor({N}, 10);
  nn::Tensor<f32> wt(target(), {N, K}, nn::transpose(w.to_host(), K, N));
  nn::NormLinear<f32, Epilogue::BiasGelu> fc(ctx, nn::LayerNorm<f32>(ctx, lnw, lnb), w, b, wt, {});
  ctx.compile();
  for (int64_t M : {1, 6, 20}) {
    CAPTURE(M);
    nn::Tensor<f32> x = tensor({M, K}, 11, 3.0f), normed(target(), {M, K}), out(target(), {M, N});
    fc(ctx, x, normed, out);
    std::vector<double> n64 = ref::layernorm(x.to_host(), lnw.to_host(), lnb.to_host(), int(M), int(K), 1e-5);
    std::vector<float> nf(n64.begin(), n64.end());
    checkClose(out.to_host(), reference(nf, w.to_host(), b.to_host(), nullptr, Epilogue::BiasGelu, int(M), int(N), int(K)),
               1e-4);
  }
}

TEST_CASE("a block's decode-step products each bring the next one's weight into L2") {
  const int64_t C = 64, H = 4, F = 4 * C, T = 16;
  nn::Context ctx(target());
  auto ln = [&](uint32_t seed) { return nn::LayerNorm<f32>(ctx, tensor({C}, seed), tensor({C}, seed + 1, 0.1f)); };
  auto t = [&](const nn::Tensor<f32> &w) {
    return nn::Tensor<f32>(target(), {w.dim(1), w.dim(0)}, nn::transpose(w.to_host(), int(w.dim(0)), int(w.dim(1))));
  };
  nn::Tensor<f32> wqkv = tensor({C, 3 * C}, 30, 0.2f), wp = tensor({C, C}, 31, 0.1f),
                  wfc = tensor({C, F}, 32, 0.1f), wout = tensor({F, C}, 33, 0.1f);
  auto block = [&] {
    nn::Linear<f32, Epilogue::BiasResidual> proj(ctx, wp, tensor({C}, 34, 0.1f), t(wp), {});
    nn::CausalSelfAttention<f32> attn(ctx, ln(35), wqkv, tensor({3 * C}, 37, 0.1f), t(wqkv), std::move(proj),
                                      int(H), nn::KvCache<f32>(target(), 1, T, C));
    nn::NormLinear<f32, Epilogue::BiasGelu> fc(ctx, ln(38), wfc, tensor({F}, 40, 0.1f), t(wfc),
                                               {"fc_gelu"});
    nn::Linear<f32, Epilogue::BiasResidual> out(ctx, wout, tensor({C}, 41, 0.1f), t(wout), {"mlp_proj"});
    return nn::TransformerBlock<f32>(std::move(attn), nn::Mlp<f32>(std::move(fc), std::move(out)));
  };
  nn::TransformerBlock<f32> plain = block(), ahead = block();
  nn::Tensor<f32> next = tensor({3 * C, C}, 42);
  CHECK(plain.attention().decode_prefetch().empty());
  ahead.set_decode_prefetch(next);
  // QKV -> projection -> MLP up -> MLP down -> what comes after the block.
  CHECK(ahead.attention().decode_prefetch().data() == ahead.attention().proj().weight_t().data());
  CHECK(ahead.attention().proj().decode_prefetch().data() == ahead.mlp().fc().weight_t().data());
  CHECK(ahead.mlp().fc().decode_prefetch().data() == ahead.mlp().proj().weight_t().data());
  CHECK(ahead.mlp().proj().decode_prefetch().data() == next.data());
  ctx.compile();
  // A prefill of 3 tokens and 2 decode steps: the same values either way.
  nn::Workspace<f32> ws(target(), T, C, 1, H, plain.attention().splits(), C / H);
  nn::Packing packing{nn::Tensor<i32>(target(), {3}, std::vector<int32_t>{0, 0, 0}),
                      nn::Tensor<i32>(target(), {3}, std::vector<int32_t>{0, 1, 2}),
                      nn::Tensor<i32>(target(), {1}, std::vector<int32_t>{0}),
                      nn::Tensor<i32>(target(), {1}, std::vector<int32_t>{3}), 1, 3};
  std::vector<std::vector<float>> outs;
  for (const nn::TransformerBlock<f32> *b : {&plain, &ahead}) {
    nn::Tensor<f32> x = tensor({3, C}, 43);
    b->prefill(ctx, x, packing, ws.rows(3));
    std::vector<float> all = x.to_host();
    for (int step = 0; step < 2; ++step) {
      nn::Tensor<f32> one = tensor({1, C}, 44 + uint32_t(step));
      b->decode(ctx, one, nn::Tensor<i32>(target(), {1}, std::vector<int32_t>{3 + step}), ws.rows(1));
      std::vector<float> h = one.to_host();
      all.insert(all.end(), h.begin(), h.end());
    }
    outs.push_back(all);
  }
  CHECK(outs[0] == outs[1]);
}

TEST_CASE("blocks refuse tensors of the wrong shape, naming the block and the argument") {
  nn::Context ctx(target());
  nn::Linear<f32, Epilogue::Bias> linear(ctx, tensor({64, 128}, 1), tensor({128}, 2));
  ctx.compile();
  nn::Tensor<f32> x = tensor({5, 32}, 3), out(target(), {5, 128}), wrongOut(target(), {4, 128});
  CHECK_THROWS_WITH_AS(linear(ctx, x, out),
                       "nn::Linear(64 -> 128): x has shape [5, 32]; expected [*, 64]", Error);
  CHECK_THROWS_WITH_AS(linear(ctx, tensor({5, 64}, 4), wrongOut),
                       "nn::Linear(64 -> 128): out has shape [4, 128]; expected [5, 128]", Error);
  using BiasLinear = nn::Linear<f32, Epilogue::Bias>;
  CHECK_THROWS_WITH_AS(BiasLinear(ctx, tensor({64, 128}, 1), tensor({96}, 2)),
                       "nn::Linear(64 -> 128): bias has shape [96]; expected [128]", Error);
  CHECK_THROWS_WITH_AS(nn::LayerNorm<f32>(ctx, tensor({4096}, 1), tensor({4096}, 2)),
                       "nn::LayerNorm: 4096 features is wider than the layernorm kernel (2048)", Error);
  // A handle launched before its context compiled it.
  nn::Context fresh(target());
  nn::LayerNorm<f32> ln(fresh, tensor({64}, 1), tensor({64}, 2));
  nn::Tensor<f32> y(target(), {2, 64});
  CHECK_THROWS_WITH_AS(ln(fresh, tensor({2, 64}, 3), y),
                       "nn: kernel layernorm is not compiled yet (call Context::compile)", Error);
  // Shared kernels: a second linear layer of the same kind (other shapes)
  // adds none.
  nn::Context one(target()), two(target());
  nn::Linear<f32, Epilogue::BiasGelu> a(one, tensor({64, 64}, 1), tensor({64}, 2));
  nn::Linear<f32, Epilogue::BiasGelu> b(two, tensor({64, 64}, 1), tensor({64}, 2));
  nn::Linear<f32, Epilogue::BiasGelu> c(two, tensor({32, 16}, 1), tensor({16}, 2));
  one.compile();
  two.compile();
  CHECK(one.kernels().size() >= 1);
  CHECK(two.kernels().size() == one.kernels().size());
}

namespace {
/// One sequence of 5 prompt tokens, then 2 decode steps, against attention
/// computed in double from the same q, k, v; with the heuristics' kernels or
/// (`tuned`) every kernel tuned first.
void checkAttention(bool tuned, int residentKeys = nn::CausalSelfAttention<f32>::kResidentKeys) {
  const int64_t C = 64, H = 4, T = 64;
  const int P = 5;
  nn::Context ctx(target());
  auto ln = [&] { return nn::LayerNorm<f32>(ctx, tensor({C}, 20), tensor({C}, 21, 0.1f)); };
  nn::Tensor<f32> wqkv = tensor({C, 3 * C}, 22, 0.2f), bqkv = tensor({3 * C}, 23, 0.1f);
  nn::Tensor<f32> wp = tensor({C, C}, 24, 0.1f), bp = tensor({C}, 25, 0.1f);
  nn::Tensor<f32> wqkvT(target(), {3 * C, C}, nn::transpose(wqkv.to_host(), C, 3 * C));
  nn::Linear<f32, Epilogue::BiasResidual> proj(ctx, wp, bp);
  nn::CausalSelfAttention<f32> attn(ctx, ln(), wqkv, bqkv, wqkvT, std::move(proj), int(H),
                                    nn::KvCache<f32>(target(), 1, T, C), nn::kDecodeRows,
                                    nn::kFewRows, false, residentKeys);
  ctx.compile();
  nn::Workspace<f32> ws(target(), T, C, 1, H, attn.splits(), C / H);
  if (tuned) {
    nn::Tensor<f32> scratch = tensor({5, C}, 27);
    attn.tune(ctx, scratch, ws.rows(5));
    attn.tune_decode(ctx, scratch.rows(0, 1), ws.rows(1));
    CHECK(attn.prefill_tuned(5) != nullptr);
    CHECK(attn.decode_tuned() != nullptr);
  }

  // The whole sequence (prompt and the decoded tokens' inputs) up front.
  const int total = P + 2;
  std::vector<float> xs = randoms(std::size_t(total * C), 26);
  // Reference: layernorm, qkv, causal attention, projection, residual.
  std::vector<float> lw = ln().weight().to_host(), lb = ln().bias().to_host();
  std::vector<double> n = ref::layernorm(xs, lw, lb, total, int(C), 1e-5);
  std::vector<float> nf(n.begin(), n.end());
  std::vector<double> qkv = reference(nf, wqkv.to_host(), bqkv.to_host(), nullptr, Epilogue::Bias,
                                      total, int(3 * C), int(C));
  int hd = int(C / H);
  std::vector<float> att(std::size_t(total * C));
  for (int t = 0; t < total; ++t)
    for (int h = 0; h < H; ++h) {
      std::vector<double> s(std::size_t(t + 1));
      double m = -1e300, sum = 0;
      for (int j = 0; j <= t; ++j) {
        double d = 0;
        for (int i = 0; i < hd; ++i)
          d += qkv[std::size_t(t * 3 * C + h * hd + i)] * qkv[std::size_t(j * 3 * C + C + h * hd + i)];
        s[std::size_t(j)] = d / std::sqrt(double(hd));
        m = std::max(m, s[std::size_t(j)]);
      }
      for (double &v : s)
        sum += (v = std::exp(v - m));
      for (int i = 0; i < hd; ++i) {
        double o = 0;
        for (int j = 0; j <= t; ++j)
          o += s[std::size_t(j)] / sum * qkv[std::size_t(j * 3 * C + 2 * C + h * hd + i)];
        att[std::size_t(t * C + h * hd + i)] = float(o);
      }
    }
  std::vector<float> xsCopy = xs;
  std::vector<double> want =
      reference(att, wp.to_host(), bp.to_host(), &xsCopy, Epilogue::BiasResidual, total, int(C), int(C));

  // Prefill the prompt's rows.
  nn::Tensor<f32> x(target(), {P, C}, std::span<const float>(xs.data(), std::size_t(P * C)));
  std::vector<int32_t> seq(P, 0), pos(P);
  for (int i = 0; i < P; ++i)
    pos[std::size_t(i)] = i;
  nn::Packing packing{nn::Tensor<i32>(target(), {P}, seq), nn::Tensor<i32>(target(), {P}, pos),
                      nn::Tensor<i32>(target(), {1}, std::vector<int32_t>{0}),
                      nn::Tensor<i32>(target(), {1}, std::vector<int32_t>{P}), 1, P};
  attn.prefill(ctx, x, packing, ws.rows(P));
  checkClose(x.to_host(), std::vector<double>(want.begin(), want.begin() + P * C), 1e-4);
  // Two decode steps, one row each.
  for (int t = P; t < total; ++t) {
    CAPTURE(t);
    nn::Tensor<f32> row(target(), {1, C}, std::span<const float>(xs.data() + t * C, std::size_t(C)));
    nn::Tensor<i32> at(target(), {1}, std::vector<int32_t>{t});
    attn.decode(ctx, row, at, ws.rows(1));
    checkClose(row.to_host(), std::vector<double>(want.begin() + t * C, want.begin() + (t + 1) * C), 1e-4);
  }
  // A workspace with room for fewer decode attention parts than the block's
  // kernels may write is refused before anything is launched.
  nn::Workspace<f32> small(target(), T, C, 1, H, 4, C / H);
  nn::Tensor<f32> row(target(), {1, C}, std::span<const float>(xs.data(), std::size_t(C)));
  nn::Tensor<i32> at(target(), {1}, std::vector<int32_t>{P});
  int before = ctx.launches();
  CHECK_THROWS_WITH_AS(attn.decode(ctx, row, at, small.rows(1)),
                       "nn::CausalSelfAttention: ws.parts has shape [1, 4, 4, 18]; this decode step needs at "
                       "least [1, 4, 32, 18] (a Workspace of splits() splits)",
                       Error);
  CHECK(ctx.launches() == before);
}
} // namespace

TEST_CASE("nn::CausalSelfAttention: a prefill and decode steps agree with the reference") {
  checkAttention(false);
}

TEST_CASE("nn::CausalSelfAttention: the split decode attention (no resident keys) agrees with the reference") {
  checkAttention(false, 0);
}

TEST_CASE("nn::CausalSelfAttention: a negative resident_keys is refused") {
  nn::Context ctx(target());
  const int64_t C = 64;
  nn::Tensor<f32> wqkv = tensor({C, 3 * C}, 22, 0.2f);
  nn::Tensor<f32> wqkvT(target(), {3 * C, C}, nn::transpose(wqkv.to_host(), C, 3 * C));
  CHECK_THROWS_WITH_AS(
      nn::CausalSelfAttention<f32>(
          ctx, nn::LayerNorm<f32>(ctx, tensor({C}, 20), tensor({C}, 21, 0.1f)), wqkv, tensor({3 * C}, 23, 0.1f),
          wqkvT, nn::Linear<f32, Epilogue::BiasResidual>(ctx, tensor({C, C}, 24, 0.1f), tensor({C}, 25, 0.1f)),
          4, nn::KvCache<f32>(target(), 1, 64, C), nn::kDecodeRows, nn::kFewRows, false, -1),
      "nn::CausalSelfAttention(64): resident_keys must be >= 0 (got -1)", Error);
}

TEST_CASE("nn::CausalSelfAttention: tuned prefill and decode kernels agree with the reference") {
  test::TempDir dir("nn-tune-attention");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);
  checkAttention(true);
}

TEST_CASE("nn::CausalSelfAttention: decode attention is tuned per length bucket") {
  test::TempDir dir("nn-tune-attention-buckets");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);
  const int64_t C = 64, H = 4;
  nn::Context ctx(target());
  auto block = [&](int64_t T) {
    nn::Tensor<f32> wqkv = tensor({C, 3 * C}, 22, 0.2f);
    nn::Tensor<f32> wqkvT(target(), {3 * C, C}, nn::transpose(wqkv.to_host(), C, 3 * C));
    return nn::CausalSelfAttention<f32>(
        ctx, nn::LayerNorm<f32>(ctx, tensor({C}, 20), tensor({C}, 21, 0.1f)), wqkv, tensor({3 * C}, 23, 0.1f),
        wqkvT, nn::Linear<f32, Epilogue::BiasResidual>(ctx, tensor({C, C}, 24, 0.1f), tensor({C}, 25, 0.1f)),
        int(H), nn::KvCache<f32>(target(), 1, T, C));
  };
  auto attn = block(512), odd = block(200), small = block(64);
  ctx.compile();
  // Powers of two from 128, at most the cache's length; 0 (unknown) and
  // anything longer than the cache: the whole cache.
  CHECK(attn.decode_buckets() == std::vector<int64_t>{128, 256, 512});
  CHECK(odd.decode_buckets() == std::vector<int64_t>{128, 200});
  CHECK(small.decode_buckets() == std::vector<int64_t>{64});
  for (auto [keys, bucket] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 128}, {128, 128}, {129, 256}, {300, 512}, {512, 512}, {0, 512}, {5000, 512}}) {
    CAPTURE(keys);
    CHECK(attn.decode_bucket(keys) == bucket);
  }
  CHECK(odd.decode_bucket(150) == 200);
  CHECK(small.decode_bucket(1) == 64);
  // The untuned decode attention merges in a thread-block cluster where the
  // target has them.
  CHECK(Target::cuda("sm_90a").has_clusters());
  CHECK(Target::cuda("sm_100").has_clusters());
  CHECK_FALSE(Target::cuda("sm_80").has_clusters());
  CHECK(Target::cuda("sm_90a").sm() == 90);
  CHECK(Target::cuda("sm_120a").sm() == 120);
  CHECK(Target::cuda("gfx90").sm() == 0);
  CHECK(Target::cpu().sm() == 0);
  CHECK(Target::cpu().has_clusters()); // emulated, a thread per program
  // Untuned: no bucket has a tuned kernel. Tuning gives each its own.
  CHECK(attn.decode_tuned(1, 1) == nullptr);
  nn::Workspace<f32> ws(target(), 512, C, 1, H, attn.splits(), C / H);
  nn::Tensor<f32> x = tensor({1, C}, 27);
  attn.tune_decode(ctx, x, ws.rows(1));
  const Tuned *shortest = attn.decode_tuned(1, 100), *middle = attn.decode_tuned(1, 200),
              *longest = attn.decode_tuned(1, 400);
  REQUIRE(shortest != nullptr);
  REQUIRE(middle != nullptr);
  REQUIRE(longest != nullptr);
  CHECK(shortest != middle);
  CHECK(middle != longest);
  CHECK(attn.decode_tuned(1, 0) == longest);
  CHECK(attn.decode_tuned(1, 1) == shortest);
  // Partials in global memory or merged in a cluster: either kernel.
  CHECK(shortest->label().rfind("AttentionDecode", 0) == 0);
  // Steps of two sequences were not tuned.
  CHECK(attn.decode_tuned(2, 100) == nullptr);
}

namespace {
nn::Tensor<f16> halfTensor(nn::Shape shape, uint32_t seed, float scale = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v = randoms(std::size_t(n), seed, scale);
  std::vector<half> h(v.begin(), v.end());
  return nn::Tensor<f16>(target(), std::move(shape), h);
}
std::vector<float> floats(const nn::Tensor<f16> &t) {
  std::vector<half> h = t.to_host();
  return std::vector<float>(h.begin(), h.end());
}
std::vector<double> doubles(const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); }
/// layernorm(x) in double, rounded to fp16 as the kernels round it.
std::vector<float> normedHalf(const nn::Tensor<f16> &x, const nn::LayerNorm<f16> &ln) {
  std::vector<double> n = ref::layernorm(floats(x), floats(ln.weight()), floats(ln.bias()), int(x.dim(0)),
                                         int(x.dim(1)), 1e-5);
  std::vector<float> out;
  for (double v : n)
    out.push_back(float(half(float(v))));
  return out;
}
} // namespace

TEST_CASE("fp16 steps of 2 to 16 rows: layernorm and product in one launch, QKV into the caches, the head") {
  const int64_t C = 64, H = 4, T = 16, B = 5, V = 200;
  const double tol = 2e-2;
  nn::Context ctx(target());
  auto ln = [&](uint32_t seed) { return nn::LayerNorm<f16>(ctx, halfTensor({C}, seed), halfTensor({C}, seed + 1, 0.1f)); };
  auto transposed = [&](const nn::Tensor<f16> &w) {
    return nn::Tensor<f16>(target(), {w.dim(1), w.dim(0)}, nn::transpose(w.to_host(), w.dim(0), w.dim(1)));
  };
  // The MLP's first product (decode-step kernels for one row only, so that
  // 2 to 16 rows run the few-row kernel), and the same without it.
  nn::Tensor<f16> w = halfTensor({C, 4 * C}, 40, 0.2f), b = halfTensor({4 * C}, 41, 0.1f);
  nn::NormLinear<f16, Epilogue::BiasGelu> fc(ctx, ln(42), w, b, transposed(w), {"fc", 1, 16, true});
  nn::NormLinear<f16, Epilogue::BiasGelu> fc0(ctx, ln(42), w, b, transposed(w), {"fc", 1, 0, false, 0});
  // The head on wte [V, C].
  nn::Tensor<f16> wte = halfTensor({V, C}, 44, 0.2f);
  nn::LmHead<f16> head(ctx, ln(45), transposed(wte), wte, 16, true);
  // Attention whose steps of 2 to 16 sequences run ops::FewRowsQkv, and the
  // same on the prefill kernels.
  nn::Tensor<f16> wqkv = halfTensor({C, 3 * C}, 47, 0.2f), bqkv = halfTensor({3 * C}, 48, 0.1f);
  nn::Tensor<f16> wp = halfTensor({C, C}, 49, 0.1f), bp = halfTensor({C}, 50, 0.1f);
  auto attention = [&](int few, bool fuse) {
    // Without few-row kernels, none for more rows either: the prefill products.
    int many = few > 0 ? nn::kManyRows : 0;
    nn::Linear<f16, Epilogue::BiasResidual> proj(ctx, wp, bp, transposed(wp), {"proj", 1, few, false, many});
    return nn::CausalSelfAttention<f16>(ctx, ln(51), wqkv, bqkv, transposed(wqkv), std::move(proj), int(H),
                                        nn::KvCache<f16>(target(), B, T, C), 1, few, fuse,
                                        nn::CausalSelfAttention<f16>::kResidentKeys, many);
  };
  // And with the layernorm as its own launch before ops::FewRowsQkv.
  nn::CausalSelfAttention<f16> attn = attention(16, true), attn0 = attention(0, true),
                               apart = attention(16, false);
  ctx.compile();

  CHECK(fc.few(2));
  CHECK(fc.few(16));
  CHECK_FALSE(fc.few(1));  // the one-row decode kernel
  CHECK_FALSE(fc.few(17)); // the many-row kernels
  CHECK_FALSE(fc0.few(5));
  CHECK(attn.fewQkv(B));
  CHECK_FALSE(attn0.fewQkv(B));
  CHECK(apart.fewQkv(B));

  for (int64_t M : {2, 5, 16}) {
    CAPTURE(M);
    nn::Tensor<f16> x = halfTensor({M, C}, 60 + uint32_t(M), 3.0f), normed(target(), {M, C});
    nn::Tensor<f16> out(target(), {M, 4 * C}), out0(target(), {M, 4 * C}), logits(target(), {M, V});
    fc(ctx, x, normed, out);
    fc0(ctx, x, normed, out0);
    std::vector<float> n = normedHalf(x, fc.layernorm());
    checkClose(floats(out), reference(n, floats(w), floats(b), nullptr, Epilogue::BiasGelu, int(M), int(4 * C), int(C)), tol);
    checkClose(floats(out0), doubles(floats(out)), tol);
    head(ctx, x, normed, logits);
    std::vector<float> nh = normedHalf(x, ln(45));
    std::vector<float> wteT = nn::transpose(floats(wte), V, C);
    checkClose(floats(logits), reference(nh, wteT, {}, nullptr, Epilogue::None, int(M), int(V), int(C)), tol);
  }

  // Five prompts of 1 to 5 tokens prefilled into both blocks, then one
  // decode step of the five sequences: the same rows out, the same caches.
  std::vector<int32_t> lengths{3, 1, 5, 2, 4}, seq, pos, starts;
  for (int s = 0; s < int(B); ++s) {
    starts.push_back(int32_t(seq.size()));
    for (int t = 0; t < lengths[std::size_t(s)]; ++t) {
      seq.push_back(s);
      pos.push_back(t);
    }
  }
  const int64_t R = int64_t(seq.size());
  nn::Packing packing{nn::Tensor<i32>(target(), {R}, seq), nn::Tensor<i32>(target(), {R}, pos),
                      nn::Tensor<i32>(target(), {B}, starts), nn::Tensor<i32>(target(), {B}, lengths), int(B), 5};
  nn::Workspace<f16> ws(target(), R, C, B, H, attn.splits(), C / H);
  nn::Tensor<f16> prompt = halfTensor({R, C}, 70), step = halfTensor({B, C}, 71);
  nn::Tensor<i32> at(target(), {B}, lengths);
  std::vector<std::vector<float>> rows, ks, vs;
  std::vector<int> launches;
  for (const nn::CausalSelfAttention<f16> *a : {&attn, &attn0, &apart}) {
    nn::Tensor<f16> x(target(), {R, C}, prompt.to_host()), y(target(), {B, C}, step.to_host());
    a->prefill(ctx, x, packing, ws);
    int before = ctx.launches();
    a->decode(ctx, y, at, ws.rows(B));
    launches.push_back(ctx.launches() - before);
    rows.push_back(floats(y));
    ks.push_back(floats(a->cache().k));
    vs.push_back(floats(a->cache().v));
  }
  checkClose(rows[0], doubles(rows[1]), tol);
  checkClose(ks[0], doubles(ks[1]), tol);
  checkClose(vs[0], doubles(vs[1]), tol);
  checkClose(rows[2], doubles(rows[1]), tol);
  checkClose(ks[2], doubles(ks[1]), tol);
  checkClose(vs[2], doubles(vs[1]), tol);
  // QKV with the cache write, attention, projection; the layernorm apart
  // adds its launch; the prefill kernels also launch the layernorm and the
  // cache write.
  CHECK(launches == std::vector<int>{3, 5, 4});

  CHECK_THROWS_WITH_AS(nn::LmHead<f16>(ctx, ln(45), transposed(wte), wte, 17),
                       "nn::Linear(64 -> 200): few_rows must be 0 to 16 (got 17)", Error);
}

TEST_CASE("fp16 products of 17 to 64 rows run the many-row kernels, as the prefill products compute them") {
  const int64_t C = 64, F = 4 * C;
  const double tol = 2e-2;
  nn::Context ctx(target());
  auto transposed = [&](const nn::Tensor<f16> &w) {
    return nn::Tensor<f16>(target(), {w.dim(1), w.dim(0)}, nn::transpose(w.to_host(), w.dim(0), w.dim(1)));
  };
  // The MLP's down product (K = 4C, split along K) with the residual, and
  // its up product after a layernorm launch with gelu; each also on the
  // prefill products (many_rows 0).
  nn::Tensor<f16> wd = halfTensor({F, C}, 80, 0.1f), bd = halfTensor({C}, 81, 0.1f);
  nn::Tensor<f16> wu = halfTensor({C, F}, 82, 0.2f), bu = halfTensor({F}, 83, 0.1f);
  nn::Linear<f16, Epilogue::BiasResidual> down(ctx, wd, bd, transposed(wd), {"down", 1, 16, false, 64});
  nn::Linear<f16, Epilogue::BiasResidual> down0(ctx, wd, bd, transposed(wd), {"down", 1, 16, false, 0});
  auto ln = [&] { return nn::LayerNorm<f16>(ctx, halfTensor({C}, 84), halfTensor({C}, 85, 0.1f)); };
  nn::NormLinear<f16, Epilogue::BiasGelu> up(ctx, ln(), wu, bu, transposed(wu), {"up", 1, 16, false, 64});
  nn::NormLinear<f16, Epilogue::BiasGelu> up0(ctx, ln(), wu, bu, transposed(wu), {"up", 1, 16, false, 0});
  ctx.compile();
  CHECK(down.many(17));
  CHECK(down.many(64));
  CHECK_FALSE(down.many(16)); // the few-row kernels
  CHECK_FALSE(down.many(65)); // the prefill products
  CHECK_FALSE(down0.many(17));
  // By default up to 32 rows (kManyRowsDefault).
  nn::Linear<f16, Epilogue::BiasResidual> down32(ctx, wd, bd, transposed(wd), {"down", 1});
  CHECK(down32.many(32));
  CHECK_FALSE(down32.many(33));
  CHECK(up.linear().many(40));
  for (int64_t M : {17, 40, 64}) {
    CAPTURE(M);
    nn::Tensor<f16> h = halfTensor({M, F}, 90 + uint32_t(M), 1.0f), res = halfTensor({M, C}, 91, 1.0f);
    nn::Tensor<f16> out(target(), {M, C}, res.to_host()), out0(target(), {M, C}, res.to_host());
    down(ctx, h, out, out);
    down0(ctx, h, out0, out0);
    std::vector<float> r = floats(res);
    checkClose(floats(out), reference(floats(h), floats(wd), floats(bd), &r, Epilogue::BiasResidual, int(M), int(C),
                                      int(F)),
               tol);
    checkClose(floats(out0), doubles(floats(out)), tol);
    nn::Tensor<f16> x = halfTensor({M, C}, 92 + uint32_t(M), 3.0f), normed(target(), {M, C});
    nn::Tensor<f16> hu(target(), {M, F}), hu0(target(), {M, F});
    up(ctx, x, normed, hu);
    up0(ctx, x, normed, hu0);
    checkClose(floats(hu), reference(normedHalf(x, up.layernorm()), floats(wu), floats(bu), nullptr, Epilogue::BiasGelu, int(M),
                                     int(F), int(C)),
               tol);
    checkClose(floats(hu0), doubles(floats(hu)), tol);
  }
  using Down = nn::Linear<f16, Epilogue::BiasResidual>;
  nn::LinearOptions tooMany{"down", 1, 16, false, 65};
  CHECK_THROWS_WITH_AS(Down(ctx, wd, bd, transposed(wd), tooMany), "nn::Linear(256 -> 64): many_rows must be 0 to 64 (got 65)",
                       Error);
}

// Compile-time pruning of a search space: an f32 128x128x64 pipeline of 4
// stages (256 KB) does not fit in shared memory; 16x16 tiles give 8 warps
// nothing to do; producer warps need 64-column K panels.
static_assert(!tuning::feasible<ops::MatmulBias<f32, 128, 128, 64>>(4, 4, 0));
static_assert(tuning::feasible<ops::MatmulBias<f32, 128, 128, 64>>(8, 3, 0));
static_assert(!tuning::feasible<ops::MatmulBias<f16, 16, 16, 64>>(8, 2, 0));
static_assert(!tuning::feasible<ops::MatmulBias<f16, 64, 64, 32>>(4, 2, int(Schedule::WarpSpecialized)));

TEST_CASE("a declared space is tile types times options as data, pruned by feasible") {
  auto space = tuning::product(boost::hana::tuple_t<ops::MatmulBias<f32, 128, 128, 64>, ops::MatmulBias<f32, 32, 64, 64>>,
                               tuning::kWarps, tuning::kStages, tuning::kSchedules);
  CHECK(space.size() == 12 + 18);
  // Options that no constant lists: 16 warps, 5 stages.
  auto wide = tuning::product(boost::hana::tuple_t<ops::MatmulBias<f16, 64, 128, 64>>, std::vector<int>{4, 8, 16},
                              std::vector<int>{2, 5}, std::vector<int>{0});
  CHECK(wide.size() == 6); // 64x128 tiles on 4 to 16 warps, 2 or 5 stages: all fit
  auto both = tuning::join(space, wide);
  CHECK(both.size() == space.size() + wide.size());
  std::vector<std::string> cpu;
  both.for_each(Target::cpu(), [&]<class K>(const K &, const CompileOptions &o, const std::string &label) {
    CHECK(o.num_warps == 1);
    cpu.push_back(label);
  });
  CHECK(cpu.size() == 3); // one plain candidate a kernel on the CPU
}

// Decode-step kernels declare their own limits: an 8-row kernel of 16
// columns on one warp would hold 1024 accumulators a thread; the 8-row
// 4-column kernel GPT-2's MLP uses by default fits on 4 warps.
static_assert(!tuning::feasible<ops::AttentionPrefill<f16, 64, 64, 64>>(8, 2, 0));

TEST_CASE("decode-step kernels state their limits as values, and their spaces are data") {
  using Bias = ops::Epilogue;
  CHECK_FALSE((ops::DecodeLinear<f16, 16>{.rows = 8, .k = 3072, .ln = true, .epilogue = Bias::Bias}.feasible(1, 2, 0)));
  CHECK((ops::DecodeLinear<f16, 4>{.rows = 8, .k = 3072, .epilogue = Bias::Bias}.feasible(4, 2, 0)));
  CHECK_FALSE((ops::DecodeLinear<f16, 8>{.rows = 1, .k = 768, .ln = true, .epilogue = Bias::Bias}.feasible(4, 3, 0)));
  // One space for every width and row count: the same three tile types.
  auto qkv = nn::detail::decodeSpace<ops::DecodeQkv, f16>([](auto &k) { k.rows = 1; k.k = 768; });
  CHECK(qkv.size() > 4);
  auto wide = nn::detail::decodeSpace<ops::DecodeQkv, f16>([](auto &k) { k.rows = 8; k.k = 1600; });
  CHECK(wide.size() < qkv.size()); // eight rows of 1600 inputs fit fewer configurations
  std::vector<std::string> labels;
  qkv.for_each(Target::cuda("sm_90a"), [&]<class K>(const K &, const CompileOptions &, const std::string &label) {
    labels.push_back(label);
  });
  REQUIRE(labels.size() == qkv.size());
  CHECK(labels.front().find("DecodeQkv_f16_4_256_r1_k768/w") == 0);
}

TEST_CASE("nn::Mlp runs decode steps of 1 and 2 rows as one launch that agrees with the two products") {
  const int64_t C = 64, F = 4 * C;
  const double tol = 2e-2;
  nn::Context ctx(target());
  auto transposed = [&](const nn::Tensor<f16> &w) {
    return nn::Tensor<f16>(target(), {w.dim(1), w.dim(0)}, nn::transpose(w.to_host(), w.dim(0), w.dim(1)));
  };
  nn::Tensor<f16> lnw = halfTensor({C}, 70), lnb = halfTensor({C}, 71, 0.1f);
  nn::Tensor<f16> wfc = halfTensor({C, F}, 72, 0.2f), bfc = halfTensor({F}, 73, 0.1f);
  nn::Tensor<f16> wout = halfTensor({F, C}, 74, 0.1f), bout = halfTensor({C}, 75, 0.1f);
  auto mlp = [&](int fused) {
    nn::NormLinear<f16, Epilogue::BiasGelu> fc(ctx, nn::LayerNorm<f16>(ctx, lnw, lnb), wfc, bfc, transposed(wfc),
                                               {"fc", 2});
    nn::Linear<f16, Epilogue::BiasResidual> out(ctx, wout, bout, transposed(wout), {"mlp_proj", 2});
    return nn::Mlp<f16>(ctx, std::move(fc), std::move(out), fused);
  };
  nn::Mlp<f16> fused = mlp(2), one = mlp(1), apart = mlp(0);
  ctx.compile();
  CHECK(fused.fuses(1));
  CHECK(fused.fuses(2));
  CHECK_FALSE(fused.fuses(3));
  CHECK(one.fuses(1));
  CHECK_FALSE(one.fuses(2));
  CHECK_FALSE(apart.fuses(1));
  nn::Workspace<f16> ws(target(), 4, C, 4, 4, 1, C / 4);
  for (int64_t M : {1, 2, 1, 3}) { // the accumulator is zero again after each launch
    CAPTURE(M);
    nn::Tensor<f16> x0 = halfTensor({M, C}, 80 + uint32_t(M), 3.0f);
    std::vector<float> before = floats(x0);
    nn::Tensor<f16> a(target(), {M, C}, x0.to_host()), b(target(), {M, C}, x0.to_host());
    ctx.reset_launches();
    fused(ctx, a, ws.rows(M));
    if (M <= 2)
      CHECK(ctx.launches() == 1);
    apart(ctx, b, ws.rows(M));
    checkClose(floats(a), doubles(floats(b)), tol);
    // And against the reference: x + gelu(ln(x) W1 + b1) W2 + b2.
    std::vector<float> n = normedHalf(x0, fused.fc().layernorm());
    std::vector<double> h = reference(n, floats(wfc), floats(bfc), nullptr, Epilogue::BiasGelu, int(M), int(F), int(C));
    std::vector<float> hf(h.begin(), h.end());
    checkClose(floats(a), reference(hf, floats(wout), floats(bout), &before, Epilogue::BiasResidual, int(M), int(C), int(F)),
               tol);
  }
  // One row only: two rows run the two products.
  nn::Tensor<f16> x2 = halfTensor({2, C}, 90, 3.0f);
  ctx.reset_launches();
  one(ctx, x2, ws.rows(2));
  CHECK(ctx.launches() == 2);
}

TEST_CASE("nn::Mlp refuses a fused decode MLP it cannot build") {
  const int64_t C = 64, F = 4 * C;
  nn::Context ctx(target());
  nn::Tensor<f16> w1 = halfTensor({C, F}, 1), b1 = halfTensor({F}, 2), w2 = halfTensor({F, C}, 3), b2 = halfTensor({C}, 4);
  nn::Tensor<f16> w1t(target(), {F, C}, nn::transpose(w1.to_host(), C, F));
  auto fc = [&](nn::Tensor<f16> wt) {
    return nn::NormLinear<f16, Epilogue::BiasGelu>(ctx, nn::LayerNorm<f16>(ctx, halfTensor({C}, 5), halfTensor({C}, 6)),
                                                   w1, b1, wt, {"fc", wt.empty() ? 0 : 1});
  };
  auto proj = [&] { return nn::Linear<f16, Epilogue::BiasResidual>(ctx, w2, b2, {}, {"mlp_proj", 0}); };
  auto message = [&](auto make) {
    try {
      make();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { nn::Mlp<f16>(ctx, fc(w1t), proj(), 3); }).find("fused decode steps of 1 or 2 rows, not 3") !=
        std::string::npos);
  CHECK(message([&] { nn::Mlp<f16>(ctx, fc({}), proj(), 1); }).find("needs the first product's [N, K] weight copy") !=
        std::string::npos);
  nn::Tensor<f32> v1 = tensor({C, F}, 7), v2 = tensor({F, C}, 8);
  nn::Tensor<f32> v1t(target(), {F, C}, nn::transpose(v1.to_host(), C, F));
  CHECK(message([&] {
          nn::Mlp<f32>(ctx,
                       nn::NormLinear<f32, Epilogue::BiasGelu>(ctx, nn::LayerNorm<f32>(ctx, tensor({C}, 9), tensor({C}, 10)), v1,
                                                               tensor({F}, 11), v1t, {"fc", 1}),
                       nn::Linear<f32, Epilogue::BiasResidual>(ctx, v2, tensor({C}, 12), {}, {"mlp_proj", 0}), 1);
        }).find("the fused decode MLP takes 16-bit types") != std::string::npos);
}

TEST_CASE("decode-step kernels tune over their declared space and agree with the reference") {
  test::TempDir dir("nn-tune-decode");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);
  const int K = 64;
  const int64_t N = 96;
  nn::Context ctx(target());
  nn::Tensor<f32> lnw = tensor({K}, 7), lnb = tensor({K}, 8), w = tensor({K, N}, 9, 0.1f),
                  b = tensor({N}, 10);
  nn::Tensor<f32> wt(target(), {N, K}, nn::transpose(w.to_host(), K, N));
  nn::Linear<f32, Epilogue::Bias> linear(ctx, w, b, wt, {"lin"});
  nn::NormLinear<f32, Epilogue::Bias> normed(ctx, nn::LayerNorm<f32>(ctx, lnw, lnb), w, b, wt, {"nl"});
  ctx.compile();
  // The decode kernels' ladder: 1 row, 2, 3 (the 4-row kernel), 6 (8).
  for (int64_t M : {1, 2, 3, 6}) {
    CAPTURE(M);
    int R = M == 1 ? 1 : M == 2 ? 2 : M <= 4 ? 4 : 8;
    nn::Tensor<f32> scratchX = tensor({M, K}, 12), scratchOut(target(), {M, N});
    CHECK(linear.decode_tuned(M) == nullptr);
    linear.tune_decode(ctx, scratchX, scratchOut);
    normed.tune_decode(ctx, scratchX, scratchOut);
    REQUIRE(linear.decode_tuned(M) != nullptr);
    REQUIRE(normed.decode_tuned(M) != nullptr);
    CHECK(linear.decode_tuned(M)->label().find("DecodeLinear") == 0);
    CHECK(linear.decode_tuned(M)->label().find("_r" + std::to_string(R) + "_k64_bias/") != std::string::npos);
    CHECK(normed.decode_tuned(M)->label().find("_r" + std::to_string(R) + "_k64_ln_bias/") != std::string::npos);
    nn::Tensor<f32> x = tensor({M, K}, 11, 3.0f), out(target(), {M, N}), tmp(target(), {M, K});
    int before = ctx.launches();
    linear(ctx, x, out);
    CHECK(ctx.launches() == before + 1);
    checkClose(out.to_host(), reference(x.to_host(), w.to_host(), b.to_host(), nullptr, Epilogue::Bias,
                                        int(M), int(N), K), 1e-4);
    // A profile's elided role: the launch is neither made nor counted.
    ctx.elide = {"lin_decode" + std::to_string(R)};
    nn::Tensor<f32> untouched(target(), {M, N}, std::vector<float>(std::size_t(M * N), 7.f));
    linear(ctx, x, untouched);
    ctx.elide.clear();
    CHECK(ctx.launches() == before + 1);
    CHECK(untouched.to_host() == std::vector<float>(std::size_t(M * N), 7.f));
    normed(ctx, x, tmp, out);
    std::vector<double> n64 = ref::layernorm(x.to_host(), lnw.to_host(), lnb.to_host(), int(M), K, 1e-5);
    std::vector<float> nf(n64.begin(), n64.end());
    checkClose(out.to_host(), reference(nf, w.to_host(), b.to_host(), nullptr, Epilogue::Bias, int(M), int(N), K),
               1e-4);
  }
  // More rows than the decode kernels take: nothing to tune.
  nn::Tensor<f32> many = tensor({20, K}, 13), manyOut(target(), {20, N});
  linear.tune_decode(ctx, many, manyOut);
  CHECK(linear.decode_tuned(20) == nullptr);
  int sites = 0;
  for (const nn::KernelRecord &r : ctx.kernels())
    sites += r.source == "tuned";
  CHECK(sites == 2 * nn::detail::kDecodeSlots); // each block: a kernel per row count of the ladder
}

TEST_CASE("nn::Linear::tune times its space, persists the winner, and launches it") {
  // A fresh cache: the first tuning times the candidates, later ones read the winner back.
  test::TempDir dir("nn-tune");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);

  const int64_t K = 64, N = 96, M = 40;
  nn::Tensor<f32> w = tensor({K, N}, 1, 0.1f), b = tensor({N}, 2), x = tensor({M, K}, 3);
  std::vector<double> want = reference(x.to_host(), w.to_host(), b.to_host(), nullptr,
                                       Epilogue::Bias, int(M), int(N), int(K));
  // Where the configuration of `rows`-row products came from, after
  // tune(cached_only) on M rows; the product's result either way.
  auto tuneAndRun = [&](bool cachedOnly) {
    nn::Context ctx(target());
    nn::Linear<f32, Epilogue::Bias> linear(ctx, w, b, {}, {"tuned_linear"});
    ctx.compile();
    nn::Tensor<f32> scratchX = tensor({M, K}, 4), scratchOut(target(), {M, N});
    linear.tune(ctx, scratchX, scratchOut, cachedOnly);
    nn::Tensor<f32> out(target(), {M, N});
    int before = ctx.launches();
    linear(ctx, x, out);
    CHECK(ctx.launches() == before + 1);
    checkClose(out.to_host(), want, 1e-4);
    // Another row bucket (M = 40 is in (32, 64]) keeps the heuristic.
    CHECK(linear.tuned_for(20) == nullptr);
    std::string source = "heuristic";
    for (const nn::KernelRecord &r : ctx.kernels())
      if (r.role == "tuned_linear" && r.source != "heuristic")
        source = r.source;
    if (const Tuned *t = linear.tuned_for(M)) {
      CHECK(linear.tuned_for(64) == t);
      CHECK(ctx.tuning_seconds() > 0);
    }
    return source;
  };
  CHECK(tuneAndRun(true) == "heuristic"); // nothing persisted yet
  CHECK(tuneAndRun(false) == "tuned");
  CHECK(tuneAndRun(true) == "tuning cache");
  CHECK(tuneAndRun(false) == "tuning cache"); // tuned once, read back since
}

TEST_CASE("nn::LayerNorm tunes over one-row and several-row kernels; every candidate agrees with the reference") {
  // Each candidate is launched by the block as the persisted winner: tune
  // once, then rewrite the winner file with every label the tuning timed.
  test::TempDir dir("nn-layernorm");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);
  const int64_t C = 96;
  nn::Tensor<f32> w = tensor({C}, 31), b = tensor({C}, 32, 0.1f);
  for (int64_t rows : {int64_t(37), int64_t(3)}) { // an odd number of row blocks; fewer rows than a block
    CAPTURE(rows);
    nn::Tensor<f32> x = tensor({rows, C}, 33, 3.0f);
    std::vector<double> want = ref::layernorm(x.to_host(), w.to_host(), b.to_host(), int(rows), int(C), 1e-5);
    auto run = [&](bool cachedOnly) {
      nn::Context ctx(target());
      nn::LayerNorm<f32> ln(ctx, w, b);
      ctx.compile();
      nn::Tensor<f32> scratch = tensor({rows, C}, 34), y(target(), {rows, C}, std::vector<float>(rows * C, -7.f));
      ln.tune(ctx, scratch, scratch, cachedOnly);
      const Tuned *t = ln.tuned_for(rows);
      REQUIRE(t != nullptr);
      ln(ctx, x, y);
      checkClose(y.to_host(), want, 1e-5);
      return std::pair{t->label(), t->results()};
    };
    auto [winner, results] = run(false);
    std::vector<std::string> labels;
    for (const TuneResult &r : results)
      if (std::isfinite(r.ms))
        labels.push_back(r.label);
    // On the CPU one candidate per kernel type: a row a program, 2 and 4 rows.
    CHECK(labels.size() >= 3);
    CHECK(std::count_if(labels.begin(), labels.end(),
                        [](const std::string &l) { return l.find("LayerNormRows") != std::string::npos; }) >= 2);
    std::vector<std::filesystem::path> files;
    for (const auto &e : std::filesystem::directory_iterator(std::filesystem::path(dir.path) / "tuning"))
      if (e.path().extension() == ".txt")
        files.push_back(e.path());
    REQUIRE(files.size() == 1);
    for (const std::string &label : labels) {
      CAPTURE(label);
      std::ofstream(files[0]) << label << "\n";
      auto [used, none] = run(true);
      CHECK(used == label);
    }
    std::filesystem::remove(files[0]);
  }
}
