//===- blocks.hpp - transformer blocks made of kiln kernels ----------------===//
//
// The pieces of a GPT-style decoder, each a small class that owns its
// parameters, asks a Context for the kernels it launches (typed handles,
// compiled together by Context::compile) and checks the shapes it is given:
//
//   Embedding          x = wte[tokens] + wpe[positions]
//   LayerNorm          y = layernorm(x)
//   Linear<E>          y = E(x @ W)          E: None, Bias, BiasGelu, BiasResidual
//   NormLinear<E>      y = E(layernorm(x) @ W), one fused kernel in decode steps
//   CausalSelfAttention x += proj(attention(qkv(layernorm(x)))), with its KV cache
//   Mlp                x += proj(gelu(fc(layernorm(x))))
//   TransformerBlock   attention, then MLP
//   LmHead             logits = layernorm(x) @ wte^T
//   Sampler            next token per row: argmax, or top-k/top-p sampling
//
// Activations are row-major [rows, features] tensors. A prefill runs many
// rows (several prompts packed one after another, described by a Packing);
// a decode step runs one row per sequence and, for up to kDecodeRows rows,
// launches kernels written for 1, 2, 4 or 8 rows (the smallest that holds
// the step's): they stream each weight matrix once, as [N, K] (a layer's
// "decode copy" of W, `weight_t`), with the layernorm, the bias, gelu, the
// residual and the KV-cache write fused in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/nn/context.hpp"
#include "kiln/nn/policy.hpp"
#include "kiln/nn/tensor.hpp"
#include "kiln/nn/tunable.hpp"

#include "kiln/autotuner/space.hpp"
#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::nn {

//===----------------------------------------------------------------------===//
// Embedding and LayerNorm
//===----------------------------------------------------------------------===//

/// `out[r] = wte[tokens[r]] + wpe[positions[r]]`. wte [vocab, C], wpe
/// [context, C]; token ids and positions are checked by the caller.
template <class D> class Embedding {
public:
  Embedding(Context &ctx, Tensor<D> wte, Tensor<D> wpe) : wte_(std::move(wte)), wpe_(std::move(wpe)) {
    expect(wte_, {kAny, kAny}, "nn::Embedding", "wte");
    expect(wpe_, {kAny, wte_.dim(1)}, "nn::Embedding", "wpe");
    kernel_ = ctx.kernel<ops::Embedding<D, 256>>("embedding");
  }
  int64_t features() const { return wte_.dim(1); }
  const Tensor<D> &wte() const { return wte_; }

  void operator()(Context &ctx, const Tensor<i32> &tokens, const Tensor<i32> &positions,
                  const Tensor<D> &out) const;

  /// Tunes launches of tokens.dim(0) rows (their row bucket) over
  /// detail::rowSpace (columns per sweep x warps), writing `out`; token ids
  /// and positions must be valid.
  void tune(Context &ctx, const Tensor<i32> &tokens, const Tensor<i32> &positions, const Tensor<D> &out,
            bool cached_only = false);

private:
  template <class K>
  void launch(const Kernel<K> &k, Context &ctx, const Tensor<i32> &tokens, const Tensor<i32> &positions,
              const Tensor<D> &out) const {
    ctx.launch_as("embedding", [&] {
      k.launch(Grid(uint32_t(tokens.dim(0))), tokens.data(), positions.data(), wte_.data(), wpe_.data(),
               out.data(), int(features()));
    });
  }

  Tensor<D> wte_, wpe_;
  Handle<ops::Embedding<D, 256>> kernel_;
  TunedByRows<const Embedding &, Context &, const Tensor<i32> &, const Tensor<i32> &, const Tensor<D> &>
      tuned_;
};

/// `y = (x - mean) / sqrt(var + eps) * weight + bias` over each row of C
/// <= 2048 features; y may be x.
template <class D> class LayerNorm {
public:
  LayerNorm(Context &ctx, Tensor<D> weight, Tensor<D> bias, float eps = 1e-5f);
  int64_t features() const { return weight_.dim(0); }
  const Tensor<D> &weight() const { return weight_; }
  const Tensor<D> &bias() const { return bias_; }
  float eps() const { return eps_; }

  void operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &y) const;

  /// The search space: a row a program (ops::LayerNorm), or 2 or 4 rows a
  /// program on a grid of at most 8 programs per multiprocessor
  /// (ops::LayerNormRows: short rows), times 1 to 8 warps.
  template <int BLOCK> static auto space() {
    namespace hana = boost::hana;
    return tuning::join(tuning::product(hana::tuple_t<ops::LayerNorm<D, BLOCK, true>>, tuning::kRowWarps,
                                        tuning::kNoStages, tuning::kPlainOnly),
                        tuning::product(hana::tuple_t<ops::LayerNormRows<D, 2, BLOCK>, ops::LayerNormRows<D, 4, BLOCK>>,
                                        tuning::kRowWarps, tuning::kNoStages, tuning::kPlainOnly));
  }
  /// Tunes the warps of launches of x.dim(0) rows (their row bucket) on x
  /// and y (overwritten; y may be x), or reads a persisted winner back.
  void tune(Context &ctx, const Tensor<D> &x, const Tensor<D> &y, bool cached_only = false);
  /// The tuned kernel launches of `rows` rows use; null when heuristic.
  const Tuned *tuned_for(int64_t rows) const { return tuned_.tuned_for(rows); }

private:
  template <class K>
  void launch(const Kernel<K> &k, Context &ctx, const Tensor<D> &x, const Tensor<D> &y) const {
    ctx.launch_as("layernorm", [&] {
      int C = int(features());
      int64_t rows = x.dim(0);
      if constexpr (requires { K::Rows; }) {
        // Several rows a program, the programs looping over the row blocks.
        int64_t blocks = ceil_div(rows, int64_t(K::Rows));
        if (ctx.gpu())
          blocks = std::min<int64_t>(blocks, 8 * int64_t(cuda::multiprocessor_count()));
        k.launch(Grid(uint32_t(std::max<int64_t>(blocks, 1))), x.data(), weight_.data(), bias_.data(), y.data(),
                 int(rows), C, C, eps_);
      } else {
        k.launch(Grid(uint32_t(rows)), x.data(), weight_.data(), bias_.data(), y.data(), C, C, eps_);
      }
    });
  }

  Tensor<D> weight_, bias_;
  float eps_;
  TunedByRows<const LayerNorm &, Context &, const Tensor<D> &, const Tensor<D> &> tuned_;
  std::optional<Handle<ops::LayerNorm<D, 1024, true>>> narrow_;
  std::optional<Handle<ops::LayerNorm<D, 2048, true>>> wide_;
};

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

struct LinearOptions {
  std::string role = "linear"; ///< the kernels' name in --explain and profiles
  /// Decode-step kernels for steps of up to `decode_rows` rows (rounded
  /// down to 1, 2, 4 or kDecodeRows): one kernel for each of those row
  /// counts up to it, a step running the smallest that holds its rows; 0:
  /// none. They need the weight as [N, K] (`weight_t`).
  int decode_rows = kDecodeRows;
  /// Products of 2 to this many rows (at most kFewRows; a decode step of a
  /// batch) run ops::FewRowsLinear for 16-bit types, on any target, when the weight
  /// is also given as [N, K] (`weight_t`): the weight is the tensor cores'
  /// wide operand, and each program loads its whole panel of it before
  /// waiting on the previous kernel; 0: they run the prefill products.
  int few_rows = kFewRows;
  /// In blocks that normalise first (NormLinear, the attention's QKV, the
  /// LM head), those products run the layernorm inside the few-row kernel
  /// (ops::FewRowsNormLinear, ops::FewRowsQkv) rather than as a separate
  /// launch before ops::FewRowsLinear. Off by default: GPT-2 124M's batch-8
  /// decode graph took 610-618 us fused (5 launches a layer) against
  /// 433-439 us apart (8) on an H200 (bench/README.md).
  bool fuse_layernorm = false;
  /// Products of 2 to this many rows (at most kManyRows) that neither the
  /// decode-step nor the few-row kernels take (decode steps of 17 to 64
  /// sequences) run ops::FewRowsLinear on 32 or kManyRows rows, under the same
  /// conditions as few_rows (16-bit types, the weight as [N, K]): the
  /// weight streams in panels loaded before the wait, split along K, where
  /// the prefill products' tiles leave most multiprocessors idle (24
  /// programs for 64 rows of GPT-2 124M's 768 -> 768 projection); 0: they
  /// run the prefill products. Up to 32 rows by default (kManyRowsDefault).
  int many_rows = kManyRowsDefault;
};

/// `out = E(x @ weight)`: weight [K, N], bias [N] (not for None), and for
/// BiasResidual `out = x @ weight + bias + res` (res may be out).
///
/// Prefill tiles, as the autotuner ranked them on an H200 for GPT-2's
/// products at 2016 and 256 packed rows (kiln_bench's BM_prefill): 64x128
/// on one warpgroup with 3 stages for 16-bit types, 128x128 on 8 warps with
/// 2 stages for f32, and 32x64 with 3 stages when fewer than two 64x64 tiles
/// per multiprocessor would run. Without a bias (the LM head) 64x64x32
/// tiles, and 16-row tiles for up to 16 rows.
template <class D, Epilogue E> class Linear {
  static constexpr bool kF32 = std::is_same_v<D, f32>;
  static constexpr bool kPlain = E == Epilogue::None;
  // GPU tiles, then the CPU's.
  using Big = std::conditional_t<kPlain, detail::Matmul<D, E, 64, 64, 32>,
                                 std::conditional_t<kF32, detail::Matmul<D, E, 128, 128, 64>,
                                                    detail::Matmul<D, E, 64, 128, 64>>>;
  using Small = std::conditional_t<kPlain, detail::Matmul<D, E, 16, 64, 64>,
                                   detail::Matmul<D, E, 32, 64, 64>>;
  using Cpu = detail::Matmul<D, E, 32, 32, 16>;
  using CpuFew = detail::Matmul<D, E, 16, 32, 32>;
  /// Fewer 64x64 tiles than this (two per multiprocessor of an H100/H200)
  /// and a product uses the small tiles.
  static constexpr int64_t kFewTiles = 264;

public:
  Linear(Context &ctx, Tensor<D> weight, Tensor<D> bias = {}, Tensor<D> weight_t = {},
         LinearOptions options = {});

  int64_t in_features() const { return weight_.dim(0); }
  int64_t out_features() const { return weight_.dim(1); }
  const Tensor<D> &weight() const { return weight_; }
  const Tensor<D> &bias() const { return bias_; }
  /// The weight as [N, K] (the decode and few-row kernels'); may be empty.
  const Tensor<D> &weight_t() const { return weightT_; }
  const std::string &name() const { return name_; }
  /// While its decode-step kernel (ops::DecodeLinear) or few-row kernel
  /// (ops::FewRowsLinear) runs, the product also brings `next` into L2 (the
  /// weights of a later kernel, at most detail::kMaxPrefetchBytes of them);
  /// an empty tensor: nothing. Prefill products do not prefetch.
  void set_decode_prefetch(Tensor<D> next) { prefetch_.next = std::move(next); }
  const Tensor<D> &decode_prefetch() const { return prefetch_.next; }

  /// Rows a tuned configuration serves: products of M rows use the one
  /// tuned for rows_bucket(M), the next power of two from 16.
  static int64_t rows_bucket(int64_t rows) { return detail::rowsBucket(rows); }

  /// The prefill product's search spaces (the GPU's, the CPU's): the
  /// block's tiles times warps, stages and schedules, pruned at compile time
  /// by tuning::feasible.
  static auto space() {
    namespace hana = boost::hana;
    auto gpuSpace = tuning::product(hana::tuple_t<Big, Small>, tuning::kWarps, tuning::kStages,
                                    tuning::kSchedules);
    auto cpuSpace = tuning::product(hana::tuple_t<Cpu>, tuning::kWarps, tuning::kStages,
                                    tuning::kSchedules);
    return hana::make_pair(gpuSpace, cpuSpace);
  }

  /// Tunes the product for x.dim(0) rows (x [M, K], out [M, N]; both
  /// overwritten; for BiasResidual out is also the residual) on this GPU:
  /// every candidate of space() is compiled and timed, and products of
  /// rows_bucket(M) rows launch the winner from then on. Winners persist
  /// per (candidates, shape, GPU, compiler): a later process reads them
  /// back and compiles only the winner. With `cached_only` nothing is
  /// timed: a persisted winner is used if there is one. Rows that run the
  /// decode kernels are not tuned.
  void tune(Context &ctx, const Tensor<D> &x, const Tensor<D> &out, bool cached_only = false);

  /// Tunes the decode-step kernel that x.dim(0) rows run (of 1, 2, 4 or
  /// kDecodeRows rows, the smallest that holds them; nothing for more rows
  /// than the block's decode kernels take) over its space (detail::decodeSpace:
  /// columns per program times warps) on x [B, K] and out [B, N], both
  /// overwritten (for BiasResidual out is also the residual). Once per
  /// kernel; with `cached_only` only persisted winners are read back.
  void tune_decode(Context &ctx, const Tensor<D> &x, const Tensor<D> &out, bool cached_only = false) {
    expect(x, {kAny, in_features()}, name_, "x");
    expect(out, {x.dim(0), out_features()}, name_, "out");
    if (decodeTuner_)
      decodeTuner_(*this, ctx, x, out, cached_only);
  }
  /// The tuned decode-step kernel `rows` rows launch; null when they run a
  /// heuristic one (or no decode-step kernel).
  const Tuned *decode_tuned(int64_t rows) const {
    return decodes(rows) ? tunedDecode_[std::size_t(detail::decodeSlot(rows))].tuned() : nullptr;
  }

  /// The tuned kernel products of `rows` rows launch; null when they run
  /// the decode kernels or the heuristic's tiles.
  const Tuned *tuned_for(int64_t rows) const {
    auto t = tuned_.find(rows_bucket(rows));
    return decodes(rows) || few(rows) || many(rows) || t == tuned_.end() ? nullptr : t->second.tuned.get();
  }

  /// True when products of `rows` rows run ops::FewRowsLinear.
  bool few(int64_t rows) const {
    return few_ && rows >= 2 && rows <= options_.few_rows && !decodes(rows);
  }
  /// True when products of `rows` rows run ops::FewRowsLinear on 32 or
  /// kManyRows rows (LinearOptions::many_rows).
  bool many(int64_t rows) const {
    return many_[rows <= 32 ? 0 : 1] && rows >= 2 && rows <= options_.many_rows && !decodes(rows) && !few(rows);
  }

  /// True when `rows` rows run on the decode-step kernels.
  bool decodes(int64_t rows) const {
    return rows >= 1 && rows <= kDecodeRows && decode_[std::size_t(detail::decodeSlot(rows))];
  }

  /// out [R, N] = E(x [R, K] @ weight).
  void operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &out) const
    requires(E != Epilogue::BiasResidual)
  {
    run(ctx, x, nullptr, out);
  }
  /// out [R, N] = x [R, K] @ weight + bias + res [R, N].
  void operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &res, const Tensor<D> &out) const
    requires(E == Epilogue::BiasResidual)
  {
    expect(res, {x.dim(0), out_features()}, name_, "res");
    run(ctx, x, &res, out);
  }

private:
  // Decode kernels' launchers; they take the block as an argument (never
  // capture it) so that blocks stay movable.
  using Launch = std::function<void(const Linear &, Context &, const Tensor<D> &, const Tensor<D> *,
                                    const Tensor<D> &)>;

  void requestDecode(Context &ctx);

  /// Calls f(grid, args...) with a decode-step launch of kernel KK.
  template <class KK, class F>
  void withDecodeArgs(const Tensor<D> &x, const Tensor<D> *res, const Tensor<D> &out, F &&f) const {
    int N = int(out_features());
    auto *b = bias_.empty() ? x.data() : bias_.data();
    auto *r = res ? res->data() : out.data();
    f(Grid(ceil_div(N, KK::BN)), x.data(), x.data(), x.data(), weightT_.data(), b, r, out.data(),
      int(x.dim(0)), N, 1e-5f, prefetch_.ptr(weightT_.data()), prefetch_.count());
  }

  template <class KK>
  void launchDecode(Context &ctx, const Handle<KK> &k, const Tensor<D> &x, const Tensor<D> *res,
                    const Tensor<D> &out) const {
    withDecodeArgs<KK>(x, res, out, [&](const Grid &g, const auto &...a) { k(ctx, g, a...); });
  }

  /// Calls f(grid, args...) with a product's launch for kernel KK.
  template <class KK, class F>
  void withMatmulArgs(const Tensor<D> &x, const Tensor<D> *res, const Tensor<D> &out, F &&f) const {
    int M = int(x.dim(0)), N = int(out_features()), K = int(in_features());
    Grid g(ceil_div(M, KK::BM), ceil_div(N, KK::BN));
    if constexpr (E == Epilogue::None)
      f(g, x.data(), weight_.data(), out.data(), M, N, K, K, N, N);
    else if constexpr (E == Epilogue::BiasResidual)
      f(g, x.data(), weight_.data(), bias_.data(), res->data(), out.data(), M, N, K, K, N, N);
    else
      f(g, x.data(), weight_.data(), bias_.data(), out.data(), M, N, K, K, N, N);
  }

  template <class KK>
  void launchMatmul(Context &ctx, const Handle<KK> &k, const Tensor<D> &x, const Tensor<D> *res,
                    const Tensor<D> &out) const {
    withMatmulArgs<KK>(x, res, out, [&](const Grid &g, const auto &...a) { k(ctx, g, a...); });
  }

  // Products of 2 to kFewRows rows on the transposed weight (panels:
  // detail::withFewPanel).
  void prepareFew(Context &ctx) {
    detail::withFewPanel(out_features(), in_features(), [&]<int BN, int KC, int C>(int warps) {
      prepareRows<kFewRows, BN, KC, C>(ctx, warps, "_few", few_, &Linear::fewPlan_);
    });
  }
  // Products of kFewRows + 1 to kManyRows rows (detail::withManyPanels):
  // a kernel for up to 32 rows, and one for up to 64.
  void prepareMany(Context &ctx);
  template <int BR, int BN, int KC, int C>
  void prepareRows(Context &ctx, int warps, const char *suffix, Launch &launch,
                   detail::FewRowsPlan Linear::*plan) {
    using F = ops::FewRowsLinear<D, BR, BN, KC, C, E>;
    CompileOptions options;
    options.num_warps = warps;
    auto k = ctx.kernel<F>(options_.role + suffix, options);
    launch = [k, plan](const Linear &self, Context &c, const Tensor<D> &x, const Tensor<D> *res,
                       const Tensor<D> &out) {
      auto *b = self.bias_.empty() ? x.data() : self.bias_.data();
      const detail::FewRowsPlan &p = self.*plan;
      k(c, p.grid(), x.data(), self.weightT_.data(), b, res ? res->data() : out.data(), out.data(),
        p.partial.data(), p.counter.data(), int(x.dim(0)), int(self.out_features()), int(self.in_features()),
        self.prefetch_.ptr(self.weightT_.data()), self.prefetch_.count());
    };
    this->*plan = detail::FewRowsPlan(ctx.target(), out_features(), in_features(), BN, C * KC, BR);
  }

  void run(Context &ctx, const Tensor<D> &x, const Tensor<D> *res, const Tensor<D> &out) const;

  Tensor<D> weight_, bias_, weightT_;
  LinearOptions options_;
  detail::Prefetch<D> prefetch_;
  bool gpu_;
  std::string name_;
  std::optional<Handle<Big>> big_;
  std::optional<Handle<Small>> small_;
  std::optional<Handle<Cpu>> cpu_;
  std::optional<Handle<CpuFew>> cpuFew_;
  std::array<Launch, detail::kDecodeSlots> decode_; ///< by ladder slot; empty: none
  Launch few_;
  std::array<Launch, 2> many_; ///< up to 32 rows, up to kManyRows
  detail::FewRowsPlan fewPlan_, manyPlan32_, manyPlan64_;
  using DecodeSite = Tunable<const Linear &, Context &, const Tensor<D> &, const Tensor<D> *, const Tensor<D> &>;
  std::array<DecodeSite, detail::kDecodeSlots> tunedDecode_;
  std::function<void(Linear &, Context &, const Tensor<D> &, const Tensor<D> &, bool)> decodeTuner_;
  using TunedLaunch = std::function<void(const CompiledKernel &, const Linear &, Context &,
                                         const Tensor<D> &, const Tensor<D> *, const Tensor<D> &)>;
  struct Tuning {
    std::shared_ptr<const Tuned> tuned;
    TunedLaunch launch;
  };
  std::map<int64_t, Tuning> tuned_; ///< by rows_bucket
};

namespace detail {
/// `out = E(layernorm(x) @ wt^T)` for 2 to kFewRows rows in one launch of
/// ops::FewRowsNormLinear (the panel of withFewNormPanel; E: None, Bias or
/// BiasGelu): NormLinear's and LmHead's few-row path.
template <class D, Epilogue E> class FewRowsNorm {
public:
  FewRowsNorm() = default;
  FewRowsNorm(Context &ctx, const std::string &role, int64_t N, int64_t K);
  explicit operator bool() const { return bool(launch_); }
  /// out [R, N] from x [R, K], the layernorm `ln`, wt [N, K] and bias [N]
  /// (empty for None).
  /// The grid also brings `pf` into L2.
  void operator()(Context &ctx, const LayerNorm<D> &ln, const Tensor<D> &wt, const Tensor<D> &bias,
                  const Tensor<D> &x, const Tensor<D> &out, const Prefetch<D> &pf = Prefetch<D>{}) const {
    launch_(*this, ctx, ln, wt, bias, x, out, pf);
  }

private:
  std::function<void(const FewRowsNorm &, Context &, const LayerNorm<D> &, const Tensor<D> &, const Tensor<D> &,
                     const Tensor<D> &, const Tensor<D> &, const Prefetch<D> &)>
      launch_;
  FewRowsPlan plan_;
};
} // namespace detail

/// `out = E(layernorm(x) @ weight)`. A prefill normalises into a scratch
/// tensor (`normed`, [R, K]) and multiplies; a decode step of up to
/// `decode_rows` rows runs one kernel that normalises each row as it streams
/// the weight, and so do products of 2 to `few_rows` rows
/// (detail::FewRowsNorm, where LinearOptions::few_rows would run
/// ops::FewRowsLinear).
template <class D, Epilogue E> class NormLinear {
public:
  NormLinear(Context &ctx, LayerNorm<D> ln, Tensor<D> weight, Tensor<D> bias, Tensor<D> weight_t,
             LinearOptions options = {});
  const LayerNorm<D> &layernorm() const { return ln_; }
  const Linear<D, E> &linear() const { return linear_; }
  /// The weight as [N, K] (the decode and few-row kernels'); may be empty.
  const Tensor<D> &weight_t() const { return linear_.weight_t(); }
  /// As Linear::set_decode_prefetch, for this block's decode-step and
  /// few-row kernels.
  void set_decode_prefetch(Tensor<D> next) {
    linear_.set_decode_prefetch(next);
    prefetch_.next = std::move(next);
  }
  const Tensor<D> &decode_prefetch() const { return prefetch_.next; }
  /// True when products of 2 to options.few_rows rows run the fused few-row
  /// kernel (else, given few_rows, the layernorm and then ops::FewRowsLinear).
  static bool fusesFew(const LinearOptions &options, const Tensor<D> &weight_t) {
    return E != Epilogue::BiasResidual && options.fuse_layernorm &&
           detail::fewRowsFor<D>(options.few_rows, !weight_t.empty());
  }
  /// True when products of `rows` rows run the fused few-row kernel.
  bool few(int64_t rows) const {
    return few_ && rows >= 2 && rows <= fewRows_ && !(decode_ && rows <= decodeRows_);
  }
  /// Tunes the prefill product (Linear::tune) on normed [M, K] and out [M,
  /// N]; nothing for rows that run the decode or few-row kernels.
  void tune(Context &ctx, const Tensor<D> &normed, const Tensor<D> &out, bool cached_only = false) {
    if (few(normed.dim(0)) || (decode_ && normed.dim(0) <= decodeRows_))
      return;
    ln_.tune(ctx, normed, normed, cached_only);
    linear_.tune(ctx, normed, out, cached_only);
  }
  /// Tunes the fused decode-step kernel x.dim(0) rows run (as
  /// Linear::tune_decode, with the layernorm) on x [B, K] and out [B, N],
  /// overwriting out.
  void tune_decode(Context &ctx, const Tensor<D> &x, const Tensor<D> &out, bool cached_only = false) {
    expect(x, {kAny, linear_.in_features()}, linear_.name(), "x");
    expect(out, {x.dim(0), linear_.out_features()}, linear_.name(), "out");
    if (decodeTuner_)
      decodeTuner_(*this, ctx, x, out, cached_only);
  }
  /// The tuned decode-step kernel `rows` rows launch; null when heuristic.
  const Tuned *decode_tuned(int64_t rows) const {
    if (!decode_ || rows < 1 || rows > decodeRows_)
      return nullptr;
    return tuned_[std::size_t(detail::decodeSlot(rows))].tuned();
  }

  void operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &normed, const Tensor<D> &out) const
    requires(E != Epilogue::BiasResidual)
  {
    if (decode_ && x.dim(0) >= 1 && x.dim(0) <= decodeRows_) {
      expect(x, {kAny, linear_.in_features()}, linear_.name(), "x");
      expect(out, {x.dim(0), linear_.out_features()}, linear_.name(), "out");
      return decode_(*this, ctx, x, out);
    }
    if (few(x.dim(0))) {
      expect(x, {kAny, linear_.in_features()}, linear_.name(), "x");
      expect(out, {x.dim(0), linear_.out_features()}, linear_.name(), "out");
      return few_(ctx, ln_, linear_.weight_t(), linear_.bias(), x, out, prefetch_);
    }
    ln_(ctx, x, normed);
    linear_(ctx, normed, out);
  }

private:
  /// Calls f(grid, args...) with a decode-step launch of kernel KK.
  template <class KK, class F> void withArgs(const Tensor<D> &x, const Tensor<D> &out, F &&f) const {
    int N = int(linear_.out_features());
    f(Grid(ceil_div(N, KK::BN)), x.data(), ln_.weight().data(), ln_.bias().data(), weightT_.data(),
      linear_.bias().empty() ? x.data() : linear_.bias().data(), out.data(), out.data(),
      int(x.dim(0)), N, ln_.eps(), prefetch_.ptr(weightT_.data()), prefetch_.count());
  }
  template <class KK>
  void launch(Context &ctx, const Handle<KK> &k, const Tensor<D> &x, const Tensor<D> &out) const {
    withArgs<KK>(x, out, [&](const Grid &g, const auto &...a) { k(ctx, g, a...); });
  }

  LayerNorm<D> ln_;
  Linear<D, E> linear_;
  Tensor<D> weightT_;
  detail::Prefetch<D> prefetch_;
  std::string role_;
  int decodeRows_ = 0; ///< rows up to which decode_ runs (a count of the ladder)
  std::function<void(const NormLinear &, Context &, const Tensor<D> &, const Tensor<D> &)> decode_;
  detail::FewRowsNorm<D, E> few_;
  int fewRows_ = 0; ///< rows up to which few_ runs
  using Site = Tunable<const NormLinear &, Context &, const Tensor<D> &, const Tensor<D> &>;
  std::array<Site, detail::kDecodeSlots> tuned_; ///< by ladder slot
  std::function<void(NormLinear &, Context &, const Tensor<D> &, const Tensor<D> &, bool)> decodeTuner_;
};

//===----------------------------------------------------------------------===//
// Attention, MLP, transformer block
//===----------------------------------------------------------------------===//

/// Prompts packed one after another into the rows of a prefill: row r is
/// token pos[r] of prompt seq[r]; prompt s starts at row starts[s] and has
/// lengths[s] tokens.
struct Packing {
  Tensor<i32> seq, pos;        ///< [rows]
  Tensor<i32> starts, lengths; ///< [prompts]
  int prompts = 0, longest = 0;
};

/// Activations a stack of blocks shares (one layer runs at a time), sized
/// for `rows` rows: the normalised input, q|k|v, the attention's output, the
/// MLP's hidden layer, and the decode attention's partial results.
template <class D> struct Workspace {
  Tensor<D> normed, qkv, att, hidden;
  Tensor<f32> parts;   ///< [B, heads, splits, head_dim + 2]
  Tensor<i32> counter; ///< finished splits per (sequence, head); 0 between launches
  Tensor<i32> iota;    ///< 0, 1, 2, ...: decode row r is sequence r
  Workspace() = default;
  Workspace(const Target &t, int64_t rows, int64_t C, int64_t batch, int64_t heads, int64_t splits,
            int64_t headDim)
      : normed(t, {rows, C}), qkv(t, {rows, 3 * C}), att(t, {rows, C}), hidden(t, {rows, 4 * C}),
        parts(t, {batch, heads, splits, headDim + 2}), counter(t, {batch, heads}), iota(t, {rows}) {
    std::vector<int32_t> seq(std::size_t(rows), 0);
    for (std::size_t i = 0; i < seq.size(); ++i)
      seq[i] = int32_t(i);
    iota.copy_from(seq);
  }
  /// The first `rows` rows of each row-indexed activation.
  Workspace rows(int64_t n) const {
    Workspace w = *this;
    w.normed = normed.rows(0, n);
    w.qkv = qkv.rows(0, n);
    w.att = att.rows(0, n);
    w.hidden = hidden.rows(0, n);
    return w;
  }
};

/// Keys and values of every sequence at every position: [batch, context, C].
template <class D> struct KvCache {
  Tensor<D> k, v;
  KvCache() = default;
  KvCache(const Target &t, int64_t batch, int64_t context, int64_t C)
      : k(t, {batch, context, C}), v(t, {batch, context, C}) {}
  int64_t batch() const { return k.dim(0); }
  int64_t context() const { return k.dim(1); }
};

/// `x += proj(attention(qkv(layernorm(x))))`, causal, with `heads` heads of
/// head_dim 16, 32, 64 or 128, keeping keys and values in its cache.
///
/// Prefill: layernorm, the QKV product, the cache write, flash attention
/// over each prompt's rows (64x64 blocks), the projection with the residual.
/// Decode: one fused kernel (layernorm, QKV, cache write: ops::DecodeQkv,
/// or ops::FewRowsQkv for 2 to 16 sequences), attention split over up to
/// kMaxSplits programs per sequence and head, each taking an even share of
/// the keys so far, the last to finish combining them (ops::AttentionDecode:
/// one grid for every position, so a captured graph serves them all), or,
/// untuned on sm_90 and newer and where tuning picks it, over the 4 or 8
/// programs of a thread-block cluster that merge through its shared memory
/// (ops::AttentionDecodeCluster); untuned steps of one sequence in length
/// buckets of up to `resident_keys` keys, where there are clusters, over
/// the 4 programs of a cluster that hold their first blocks' keys and
/// values in registers (ops::AttentionDecodeResident); the projection. Decode attention reads
/// the positions and the earlier keys (the resident kernels also the
/// values) before it waits on the QKV kernel: a step starts with an
/// ordinary launch (nn::Embedding's), so the previous step has completed.
template <class D> class CausalSelfAttention {
public:
  /// The most programs per (sequence, head) a decode attention kernel uses.
  static constexpr int kMaxSplits = 32;
  /// Untuned decode steps of one sequence whose length bucket
  /// (decode_bucket) is at most this many keys run
  /// ops::AttentionDecodeResident over a cluster of 4 (where there are
  /// clusters): the keys and values of the first 4 blocks loaded before the
  /// wait on the QKV kernel, one pass over them.
  static constexpr int kResidentKeys = 512;

  /// `decode_rows`: steps of up to this many sequences (rounded down to 1,
  /// 2, 4 or kDecodeRows) run the fused decode QKV kernel of the smallest of
  /// those row counts that holds them; steps of more, up to `few_rows`
  /// sequences (at most kFewRows; 16-bit types), ops::FewRowsQkv (the
  /// layernorm, the product on w_qkv_t and the cache write in one launch),
  /// or without `fuse_layernorm` the layernorm, then ops::FewRowsQkv
  /// without it (the product and the cache write); larger ones the
  /// prefill kernels and the cache write. `resident_keys`: see
  /// kResidentKeys (0: the split kernels for every length).
  CausalSelfAttention(Context &ctx, LayerNorm<D> ln, Tensor<D> w_qkv, Tensor<D> b_qkv,
                      Tensor<D> w_qkv_t, Linear<D, Epilogue::BiasResidual> proj, int heads,
                      KvCache<D> cache, int decode_rows = kDecodeRows,
                      int few_rows = kFewRows, bool fuse_layernorm = false, int resident_keys = kResidentKeys,
                      int many_rows = kManyRowsDefault);

  int64_t features() const { return qkv_.linear().in_features(); }
  /// w_qkv as [3C, C] (the decode and few-row kernels'); may be empty.
  const Tensor<D> &weight_t() const { return qkvT_; }
  const Linear<D, Epilogue::BiasResidual> &proj() const { return proj_; }
  /// Decode steps bring each next weight into L2 while the kernel before
  /// it runs: the QKV kernel the projection's weight, the projection's
  /// kernel `next` (the weights of whatever runs after the block).
  void set_decode_prefetch(Tensor<D> next) {
    qkvPrefetch_.next = proj_.weight_t();
    proj_.set_decode_prefetch(std::move(next));
  }
  const Tensor<D> &decode_prefetch() const { return qkvPrefetch_.next; }
  int heads() const { return heads_; }
  int head_dim() const { return int(features() / heads_); }
  const KvCache<D> &cache() const { return cache_; }
  /// Programs per (sequence, head) of a decode step's attention, at most:
  /// what Workspace::parts holds for each.
  int64_t splits() const { return kMaxSplits; }
  /// The length bucket of decode steps whose sequences attend to at most
  /// `keys` keys (a position + 1): the next power of two from 128, at most
  /// the cache's length (which `keys` <= 0 also gives). Decode attention is
  /// tuned, and its tuned kernel chosen, per bucket: short contexts want
  /// small key blocks over many programs, long ones larger blocks.
  int64_t decode_bucket(int64_t keys) const {
    int64_t T = cache_.context(), b = 128;
    while (b < keys)
      b *= 2;
    return keys <= 0 ? T : std::min(b, T);
  }
  /// Every decode_bucket, shortest first.
  std::vector<int64_t> decode_buckets() const {
    std::vector<int64_t> all{decode_bucket(1)};
    while (all.back() < cache_.context())
      all.push_back(decode_bucket(all.back() + 1));
    return all;
  }

  /// Tunes the QKV and projection products for x.dim(0) rows, overwriting
  /// x and the workspace.
  void tune(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false) {
    qkv_.tune(ctx, ws.normed, ws.qkv, cached_only);
    proj_.tune(ctx, ws.att, x, cached_only);
    tuneCacheWrite(ctx, ws, x.dim(0), cached_only);
    attentionTuner_(*this, ctx, ws, x.dim(0), 0, nullptr, cached_only);
  }
  /// Tunes the kernels of a decode step of x.dim(0) sequences: the fused
  /// QKV kernel, attention (for each decode_bucket), the projection.
  /// Overwrites x, the workspace and the cache (a prefill rewrites it).
  void tune_decode(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false);
  /// The tuned attention kernels (null: heuristic): prefill of prompts of
  /// up to `longest` tokens, decode.
  const Tuned *prefill_tuned(int64_t longest) const {
    return prefillTuned_.tuned_for(longest);
  }
  /// The tuned decode attention of steps of B sequences of at most `keys`
  /// keys (decode_bucket); null: heuristic.
  const Tuned *decode_tuned(int64_t B = 1, int64_t keys = 0) const {
    auto t = decodeTuned_.find({B, decode_bucket(keys)});
    return t == decodeTuned_.end() ? nullptr : t->second.tuned();
  }

  /// A packed prefill of x [R, C]; fills the cache rows of its prompts.
  void prefill(Context &ctx, const Tensor<D> &x, const Packing &p, const Workspace<D> &ws) const {
    int64_t R = x.dim(0);
    qkv_(ctx, x, ws.normed, ws.qkv);
    writeCache(ctx, ws.qkv.rows(0, R), p.seq, p.pos);
    prefillAttention_(*this, ctx, ws.qkv, ws.att, p);
    proj_(ctx, ws.att, x, x);
  }

  /// A decode step of x [B, C]: row b is sequence b's token at pos[b].
  /// `keys`, when known, bounds pos[b] + 1 for every b: it picks the
  /// attention kernel tuned for that length (decode_bucket); any value is
  /// correct (0: the cache's length).
  void decode(Context &ctx, const Tensor<D> &x, const Tensor<i32> &pos, const Workspace<D> &ws,
              int64_t keys = 0) const;

  /// A decode step's QKV launch(es): qkv of x, its k and v written to the
  /// cache at pos.
  void decodeQkv(Context &ctx, const Tensor<D> &x, const Tensor<i32> &pos, const Workspace<D> &ws) const;

  /// True when decode steps of B sequences run ops::FewRowsQkv (after a
  /// layernorm launch unless the block fuses it).
  bool fewQkv(int64_t B) const { return fewQkv_ && B >= 2 && B <= fewRows_ && !(decodeQkv_ && B <= decodeRows_); }

private:
  // Decode steps of 2 to fewRows_ sequences: ops::FewRowsQkv, which writes
  // k and v into the caches; with LN it normalises x itself (panels:
  // detail::withFewNormPanel), otherwise the layernorm's launch comes first
  // (panels of the plain product, detail::withFewPanel).
  template <bool LN> void prepareFewQkv(Context &ctx) {
    int64_t C = features();
    auto prepare = [&]<int BN, int KC, int CH>(int warps) {
      using F = ops::FewRowsQkv<D, kFewRows, BN, KC, CH, LN>;
      CompileOptions options;
      options.num_warps = warps;
      auto k = ctx.kernel<F>(LN ? "qkv_ln_few" : "qkv_few", options);
      fewQkv_ = [k](const CausalSelfAttention &a, Context &c, const Tensor<D> &x, const Tensor<i32> &pos,
                    const Workspace<D> &ws) {
        const LayerNorm<D> &ln = a.qkv_.layernorm();
        const detail::FewRowsPlan &p = a.fewQkvPlan_;
        int64_t B = x.dim(0);
        const Tensor<D> *in = &x;
        Tensor<D> normed;
        if constexpr (!LN) {
          normed = ws.normed.rows(0, B);
          ln(c, x, normed);
          in = &normed;
        }
        k(c, p.grid(), in->data(), ln.weight().data(), ln.bias().data(), a.qkvT_.data(),
          a.qkv_.linear().bias().data(), ws.qkv.data(), p.partial.data(), p.counter.data(), pos.data(),
          a.cache_.k.data(), a.cache_.v.data(), int(B), int(3 * a.features()), int(a.features()),
          int(a.cache_.context()), ln.eps(), a.qkvPrefetch_.ptr(a.qkvT_.data()), a.qkvPrefetch_.count());
      };
      fewQkvPlan_ = detail::FewRowsPlan(ctx.target(), 3 * C, C, BN, CH * KC, kFewRows);
    };
    if constexpr (LN)
      detail::withFewNormPanel(3 * C, prepare);
    else
      detail::withFewPanel(3 * C, C, prepare);
  }

  /// Asks for the attention kernels of head dimension HD (a tile shape)
  /// and sets up their tuning; defined in lib/nn/AttentionHeads.h and
  /// compiled once for each head dimension and element type.
  template <int HD> void requestAttention(Context &ctx);
  float scale() const { return 1.0f / std::sqrt(float(head_dim())); }

  template <class KK, class F>
  void withDecodeQkvArgs(const Tensor<D> &x, const Tensor<i32> &pos, const Tensor<D> &qkv, F &&f) const {
    const LayerNorm<D> &ln = qkv_.layernorm();
    int N = int(3 * features());
    f(Grid(ceil_div(N, KK::BN)), x.data(), ln.weight().data(), ln.bias().data(), qkvT_.data(),
      qkv_.linear().bias().data(), qkv.data(), pos.data(), cache_.k.data(), cache_.v.data(),
      int(x.dim(0)), N, int(cache_.context()), ln.eps(), qkvPrefetch_.ptr(qkvT_.data()),
      qkvPrefetch_.count());
  }
  template <class KK>
  void launchDecodeQkv(Context &ctx, const Handle<KK> &k, const Tensor<D> &x, const Tensor<i32> &pos,
                       const Tensor<D> &qkv) const {
    withDecodeQkvArgs<KK>(x, pos, qkv, [&](const Grid &g, const auto &...a) { k(ctx, g, a...); });
  }

  /// Copies the k and v parts of each row of qkv into the cache at
  /// (seq[r], pos[r]).
  void writeCache(Context &ctx, const Tensor<D> &qkv, const Tensor<i32> &seq, const Tensor<i32> &pos) const {
    if (auto *t = kvTuned_.find(qkv.dim(0)))
      return (*t)(*this, ctx, qkv, seq, pos);
    launchCacheWrite(kvWrite_.kernel(), ctx, qkv, seq, pos);
  }
  template <class K>
  void launchCacheWrite(const Kernel<K> &k, Context &ctx, const Tensor<D> &qkv, const Tensor<i32> &seq,
                        const Tensor<i32> &pos) const {
    ctx.launch_as("kv_write", [&] {
      k.launch(Grid(uint32_t(qkv.dim(0))), qkv.data(), seq.data(), pos.data(), cache_.k.data(),
               cache_.v.data(), int(features()), int(cache_.context()));
    });
  }
  /// Tunes the cache write of `rows` rows (sequence 0, positions 0 ..
  /// rows - 1, at most the cache's length) from ws.qkv.
  void tuneCacheWrite(Context &ctx, const Workspace<D> &ws, int64_t rows, bool cachedOnly);

  /// Arguments of the attention kernels, for a kernel type K.
  template <class K>
  void launchPrefillAttention(const Kernel<K> &k, Context &c, const Tensor<D> &qkv,
                              const Tensor<D> &att, const Packing &p) const {
    c.launch_as("attention_prefill", [&] {
      k.launch(Grid(ceil_div(p.longest, K::BM), uint32_t(heads_), uint32_t(p.prompts)), qkv.data(),
               cache_.k.data(), cache_.v.data(), att.data(), p.starts.data(), p.lengths.data(),
               int(features()), int(cache_.context()), scale());
    });
  }
  template <class K>
  void launchDecodeAttention(const Kernel<K> &k, Context &c, const Workspace<D> &ws,
                             const Tensor<i32> &pos, int64_t B) const {
    c.launch_as("attention_decode", [&] {
      k.launch(K::grid(B, heads_), ws.qkv.data(), cache_.k.data(), cache_.v.data(), ws.parts.data(), ws.counter.data(),
               ws.att.data(), pos.data(), int(features()), int(cache_.context()), scale());
    });
  }

  /// The attention kernels' spaces for head_dim HD: prefill query x key
  /// blocks, warps and stages; decode key blocks x programs per head, and
  /// warps.
  template <int HD> static auto prefillSpace() {
    namespace hana = boost::hana;
    return tuning::product(hana::tuple_t<ops::AttentionPrefill<D, 64, 64, HD>, ops::AttentionPrefill<D, 64, 32, HD>,
                                         ops::AttentionPrefill<D, 128, 64, HD>, ops::AttentionPrefill<D, 128, 32, HD>>,
                           tuning::kWarps, hana::tuple_c<int, 2, 3>, tuning::kPlainOnly);
  }
  /// The untuned resident decode attention kernel: at head_dim 64, 64 keys
  /// a program over a cluster of 4 (H100, chained launches of 124M's 12
  /// heads: 3.5 us at 128-256 keys and 5.4 at 512, batch 1, against 3.5-4.8
  /// and 7.3 for AttentionDecodeCluster<32, 4>; one program a head with 128
  /// or 256 keys took 5.1-6.9 us, bench/README.md), and its warps: 128
  /// bytes of keys and 128 of values a thread.
  template <int HD> using ResidentDecode = ops::AttentionDecodeResident<D, 4096 / HD, HD, 4>;
  template <class K> static CompileOptions residentOptions() {
    CompileOptions o;
    o.num_warps = std::max(1, K::BN * K::D * int(sizeof(typename D::host)) / (32 * 128));
    return o;
  }

  /// Decode attention's space: the global-merge kernels, and with
  /// `clusters` the cluster-merged ones too (one space type either way).
  template <int HD> static auto decodeSpace(bool clusters) {
    namespace hana = boost::hana;
    constexpr auto global =
        hana::tuple_t<ops::AttentionDecode<D, 16, HD, 16>, ops::AttentionDecode<D, 16, HD, kMaxSplits>,
                      ops::AttentionDecode<D, 32, HD, 1>, ops::AttentionDecode<D, 64, HD, 1>,
                      ops::AttentionDecode<D, 32, HD, 2>, ops::AttentionDecode<D, 32, HD, 4>,
                      ops::AttentionDecode<D, 32, HD, 8>, ops::AttentionDecode<D, 32, HD, 16>,
                      ops::AttentionDecode<D, 32, HD, kMaxSplits>, ops::AttentionDecode<D, 64, HD, 4>,
                      ops::AttentionDecode<D, 64, HD, 8>, ops::AttentionDecode<D, 64, HD, 16>>;
    constexpr auto cluster =
        hana::tuple_t<ops::AttentionDecodeCluster<D, 16, HD, 4>, ops::AttentionDecodeCluster<D, 16, HD, 8>,
                      ops::AttentionDecodeCluster<D, 32, HD, 4>, ops::AttentionDecodeCluster<D, 32, HD, 8>,
                      ops::AttentionDecodeCluster<D, 64, HD, 4>, ops::AttentionDecodeCluster<D, 64, HD, 8>,
                      ResidentDecode<HD>, ops::AttentionDecodeResident<D, 2048 / HD, HD, 4>>;
    auto space = tuning::product(global, tuning::kRowWarps, tuning::kNoStages, tuning::kPlainOnly);
    auto clustered = tuning::product(cluster, tuning::kRowWarps, tuning::kNoStages, tuning::kPlainOnly);
    if (!clusters)
      clustered = {};
    return tuning::join(space, clustered);
  }

  NormLinear<D, Epilogue::Bias> qkv_;
  Tensor<D> qkvT_;
  detail::Prefetch<D> qkvPrefetch_;
  Linear<D, Epilogue::BiasResidual> proj_;
  int heads_;
  int residentKeys_; ///< untuned steps of buckets up to this many keys run the resident kernels
  KvCache<D> cache_;
  Handle<ops::KvWrite<D, 256>> kvWrite_;
  // Launchers of the kernels chosen by head_dim and width; they take the
  // block as an argument so that it stays movable.
  std::function<void(const CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<D> &,
                     const Packing &)>
      prefillAttention_;
  std::function<void(const CausalSelfAttention &, Context &, const Workspace<D> &,
                     const Tensor<i32> &, int64_t, int64_t)>
      decodeAttention_;
  std::function<void(const CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<i32> &,
                     const Tensor<D> &)>
      decodeQkv_;
  int decodeRows_ = 0; ///< steps of up to this many sequences run decodeQkv_
  std::function<void(const CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<i32> &,
                     const Workspace<D> &)>
      fewQkv_;
  detail::FewRowsPlan fewQkvPlan_;
  int fewRows_ = 0; ///< steps of 2 to this many sequences (beyond decodeRows_) run fewQkv_
  using QkvSite = Tunable<const CausalSelfAttention &, Context &, const Tensor<D> &,
                          const Tensor<i32> &, const Tensor<D> &>;
  std::array<QkvSite, detail::kDecodeSlots> qkvTuned_; ///< by ladder slot
  std::function<void(CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<i32> &,
                     const Tensor<D> &, bool)>
      decodeQkvTuner_;
  /// By the bucket of the longest prompt.
  TunedByRows<const CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<D> &, const Packing &>
      prefillTuned_;
  /// The last argument: the step's input while tuning (the site launches
  /// the QKV kernel first), null in a step.
  using DecodeSite = Tunable<const CausalSelfAttention &, Context &, const Workspace<D> &, const Tensor<i32> &,
                             int64_t, const Tensor<D> *>;
  std::map<std::pair<int64_t, int64_t>, DecodeSite> decodeTuned_; ///< by (sequences, decode_bucket)
  TunedByRows<const CausalSelfAttention &, Context &, const Tensor<D> &, const Tensor<i32> &,
              const Tensor<i32> &>
      kvTuned_;
  // Tunes the attention kernels: prefill for a prompt of `rows` tokens
  // (rows > 0), decode for B sequences (B > 0).
  std::function<void(CausalSelfAttention &, Context &, const Workspace<D> &, int64_t, int64_t,
                     const Tensor<D> *, bool)>
      attentionTuner_;
};

/// `x += proj(gelu(fc(layernorm(x))))` with a hidden layer of H features.
template <class D> class Mlp {
public:
  /// Hidden units a program of the fused decode MLP takes, the chunk of C
  /// it streams at a time, and its warps: 12.2 us an MLP of one row on an
  /// H100, the best of kiln_bench's BM_mlp_fused 11.4 (8, 128, 4 warps), and
  /// the two launches it replaces 7.3 (bench/README.md): it is off by default.
  static constexpr int kFusedHidden = 16, kFusedChunk = 256, kFusedWarps = 8;

  Mlp(NormLinear<D, Epilogue::BiasGelu> fc, Linear<D, Epilogue::BiasResidual> proj)
      : fc_(std::move(fc)), proj_(std::move(proj)) {
    if (proj_.in_features() != fc_.linear().out_features() ||
        proj_.out_features() != fc_.linear().in_features())
      throw Error("nn::Mlp: " + fc_.linear().name() + " then " + proj_.name());
  }
  /// As above, with decode steps of up to `fused_rows` rows (0: none; 1 or
  /// 2) run as one ops::DecodeMlp launch (layernorm, up, gelu, down, bias
  /// and residual; the hidden layer stays on chip, the down projection's
  /// partial sums meet in an f32 accumulator) instead of two. 16-bit types,
  /// given fc's [N, K] weight copy, for a model width that is a multiple of
  /// 64.
  Mlp(Context &ctx, NormLinear<D, Epilogue::BiasGelu> fc, Linear<D, Epilogue::BiasResidual> proj, int fused_rows);
  void operator()(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws) const {
    if (fuses(x.dim(0))) {
      expect(x, {kAny, fc_.linear().in_features()}, "nn::Mlp", "x");
      return fused_(*this, ctx, x);
    }
    fc_(ctx, x, ws.normed, ws.hidden);
    proj_(ctx, ws.hidden, x, x);
  }
  /// True when a decode step of `rows` rows runs the fused kernel.
  bool fuses(int64_t rows) const { return fused_ && rows >= 1 && rows <= fusedRows_; }
  const NormLinear<D, Epilogue::BiasGelu> &fc() const { return fc_; }
  const Linear<D, Epilogue::BiasResidual> &proj() const { return proj_; }
  /// Decode steps bring the projection's weight into L2 during the first
  /// product's kernel, and `next` during the projection's (or during the
  /// fused kernel).
  void set_decode_prefetch(Tensor<D> next) {
    fc_.set_decode_prefetch(proj_.weight_t());
    proj_.set_decode_prefetch(next);
    prefetch_.next = std::move(next);
  }
  /// Tunes both products for x.dim(0) rows, overwriting x and the workspace.
  void tune(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false) {
    fc_.tune(ctx, ws.normed, ws.hidden, cached_only);
    proj_.tune(ctx, ws.hidden, x, cached_only);
  }
  /// Tunes the decode-step kernels x.dim(0) rows run (overwriting x and
  /// the workspace). The fused kernel is not tuned: it keeps its heuristic
  /// configuration.
  void tune_decode(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false) {
    if (fuses(x.dim(0)))
      return;
    Tensor<D> hidden = ws.hidden.rows(0, x.dim(0));
    fc_.tune_decode(ctx, x, hidden, cached_only);
    proj_.tune_decode(ctx, hidden, x, cached_only);
  }

private:
  template <class KK> void launchFused(Context &ctx, const Handle<KK> &k, const Tensor<D> &x) const {
    const auto &ln = fc_.layernorm();
    int H = int(fc_.linear().out_features());
    k(ctx, Grid(ceil_div(H, KK::BN)), x.data(), ln.weight().data(), ln.bias().data(), fc_.weight_t().data(),
      fc_.linear().bias().data(), proj_.weight().data(), proj_.bias().data(), x.data(), acc_.data(),
      counter_.data(), int(x.dim(0)), H, ln.eps(), prefetch_.ptr(fc_.weight_t().data()), prefetch_.count());
  }

  NormLinear<D, Epilogue::BiasGelu> fc_;
  Linear<D, Epilogue::BiasResidual> proj_;
  int fusedRows_ = 0;
  std::function<void(const Mlp &, Context &, const Tensor<D> &)> fused_;
  Tensor<f32> acc_;    ///< [fused rows, C]; zero between launches
  Tensor<i32> counter_; ///< programs that have added; zero between launches
  detail::Prefetch<D> prefetch_;
};

/// GPT-2's block: `x += attn(ln_1(x)); x += mlp(ln_2(x))`.
template <class D> class TransformerBlock {
public:
  TransformerBlock(CausalSelfAttention<D> attn, Mlp<D> mlp)
      : attn_(std::move(attn)), mlp_(std::move(mlp)) {}
  const CausalSelfAttention<D> &attention() const { return attn_; }
  const Mlp<D> &mlp() const { return mlp_; }
  /// Each decode-step product brings the next one's weight into L2 while
  /// it runs (QKV, projection, MLP up, MLP down), the last `next`: the
  /// weights of whatever runs after the block (the next block's QKV
  /// weight, attention().weight_t(), or the LM head's).
  void set_decode_prefetch(Tensor<D> next) {
    attn_.set_decode_prefetch(mlp_.fc().weight_t());
    mlp_.set_decode_prefetch(std::move(next));
  }

  /// Tunes the block's products for x.dim(0) rows (Linear::tune), overwriting
  /// x and the workspace.
  void tune(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false) {
    attn_.tune(ctx, x, ws, cached_only);
    mlp_.tune(ctx, x, ws, cached_only);
  }
  /// Tunes the kernels of a decode step of x.dim(0) sequences, overwriting
  /// x, the workspace and the cache.
  void tune_decode(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only = false) {
    attn_.tune_decode(ctx, x, ws, cached_only);
    mlp_.tune_decode(ctx, x, ws, cached_only);
  }

  void prefill(Context &ctx, const Tensor<D> &x, const Packing &p, const Workspace<D> &ws) const {
    attn_.prefill(ctx, x, p, ws);
    mlp_(ctx, x, ws);
  }
  /// A decode step; `keys` as in CausalSelfAttention::decode.
  void decode(Context &ctx, const Tensor<D> &x, const Tensor<i32> &pos, const Workspace<D> &ws,
              int64_t keys = 0) const {
    attn_.decode(ctx, x, pos, ws, keys);
    mlp_(ctx, x, ws);
  }

private:
  CausalSelfAttention<D> attn_;
  Mlp<D> mlp_;
};

//===----------------------------------------------------------------------===//
// The head and the choice of the next token
//===----------------------------------------------------------------------===//

/// `dst[r] = src[index[r]]`: a prefill's last row of each prompt.
template <class D> class GatherRows {
public:
  explicit GatherRows(Context &ctx) : kernel_(ctx.kernel<ops::GatherRows<D, 256>>("gather")) {}
  void operator()(Context &ctx, const Tensor<D> &src, const Tensor<i32> &index, const Tensor<D> &dst) const {
    expect(dst, {index.dim(0), src.dim(1)}, "nn::GatherRows", "dst");
    if (auto *t = tuned_.find(index.dim(0)))
      return (*t)(*this, ctx, src, index, dst);
    launch(kernel_.kernel(), ctx, src, index, dst);
  }
  /// Tunes gathers of index.dim(0) rows (their bucket); indices must be valid.
  void tune(Context &ctx, const Tensor<D> &src, const Tensor<i32> &index, const Tensor<D> &dst,
            bool cached_only = false);

private:
  template <class K>
  void launch(const Kernel<K> &k, Context &ctx, const Tensor<D> &src, const Tensor<i32> &index,
              const Tensor<D> &dst) const {
    ctx.launch_as("gather", [&] {
      k.launch(Grid(uint32_t(index.dim(0))), src.data(), index.data(), dst.data(), int(src.dim(1)));
    });
  }
  Handle<ops::GatherRows<D, 256>> kernel_;
  TunedByRows<const GatherRows &, Context &, const Tensor<D> &, const Tensor<i32> &, const Tensor<D> &> tuned_;
};

/// `logits = layernorm(x) @ wte^T`, the head tied to the embedding. One row
/// (a decode step of one sequence) streams wte itself ([V, C]) with the
/// one-row kernel after the layernorm; 2 to `few_rows` rows run the
/// layernorm and the product in one launch of ops::FewRowsNormLinear (also
/// on wte), or without `fuse_layernorm` the layernorm and then
/// ops::FewRowsLinear (38 us a launch at 8 rows on an H200 against 68 us
/// for cuBLAS); more rows multiply by wte^T ([C, V]).
template <class D> class LmHead {
public:
  LmHead(Context &ctx, LayerNorm<D> ln_f, Tensor<D> wte_t, Tensor<D> wte, int few_rows = kFewRows,
         bool fuse_layernorm = false)
      : ln_(std::move(ln_f)),
        linear_(ctx, std::move(wte_t), Tensor<D>{}, std::move(wte),
                LinearOptions{"lm_head", 1, fuse_layernorm ? 0 : few_rows, false, 0}) {
    detail::checkFewRows(few_rows, kFewRows, linear_.name());
    if (fuse_layernorm && detail::fewRowsFor<D>(few_rows, !linear_.weight_t().empty())) {
      few_ = detail::FewRowsNorm<D, Epilogue::None>(ctx, "lm_head", linear_.out_features(), linear_.in_features());
      fewRows_ = few_rows;
    }
  }
  int64_t vocab() const { return linear_.out_features(); }
  /// The product's [V, C] weight (wte), read by its decode-step kernel.
  const Tensor<D> &weight_t() const { return linear_.weight_t(); }
  /// Tunes the head's product for normed.dim(0) rows (both tensors
  /// overwritten); nothing for rows that run the fused few-row kernel.
  void tune(Context &ctx, const Tensor<D> &normed, const Tensor<D> &logits, bool cached_only = false) {
    if (few_ && normed.dim(0) >= 2 && normed.dim(0) <= fewRows_)
      return;
    ln_.tune(ctx, normed, normed, cached_only);
    linear_.tune(ctx, normed, logits, cached_only);
  }
  /// Tunes the kernels a decode step of normed.dim(0) rows runs (the
  /// layernorm, the 1-row product; both tensors overwritten).
  void tune_decode(Context &ctx, const Tensor<D> &normed, const Tensor<D> &logits, bool cached_only = false) {
    ln_.tune(ctx, normed, normed, cached_only);
    linear_.tune_decode(ctx, normed, logits, cached_only);
  }

  /// logits [R, V] of x [R, C], normalising into `normed` [R, C] (not
  /// written by the fused few-row kernel).
  void operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &normed, const Tensor<D> &logits) const;

private:
  LayerNorm<D> ln_;
  Linear<D, Epilogue::None> linear_;
  detail::FewRowsNorm<D, Epilogue::None> few_;
  int fewRows_ = 0;
};

struct SampleOptions {
  /// 0: greedy. Otherwise softmax(logits / temperature), limited to the
  /// top_k largest (0: all), then to the smallest set reaching top_p.
  float temperature = 0;
  int top_k = 0;
  float top_p = 1;
  int32_t seed = 0;
};

/// The next token of each row of logits, on the device: `next[r]`, and
/// `pos[r] += advance` (a decode step needs nothing from the host).
template <class D> class Sampler {
public:
  explicit Sampler(Context &ctx) {
    // A vocabulary row in 7 sweeps rather than 50: each sweep waits on its loads.
    CompileOptions wide;
    wide.num_warps = 8;
    argmax_ = ctx.kernel<ops::ArgmaxRows<D, 8192>>("argmax", wide);
    sample_ = ctx.kernel<ops::SampleRows<D, 1024>>("sample");
  }
  void operator()(Context &ctx, const Tensor<D> &logits, const Tensor<i32> &next,
                  const Tensor<i32> &pos, int advance, const SampleOptions &o) const;

  /// Tunes greedy choices of next.dim(0) rows of logits over the columns
  /// swept at a time ({2048, 4096, 8192}) and warps ({4, 8}); writes `next`,
  /// leaves `pos` as it is. Sampling with a temperature keeps its kernel.
  void tune(Context &ctx, const Tensor<D> &logits, const Tensor<i32> &next, const Tensor<i32> &pos,
            bool cached_only = false);

private:
  Tunable<const Sampler &, Context &, const Tensor<D> &, const Tensor<i32> &, const Tensor<i32> &, int>
      argmaxTuned_;
  Handle<ops::ArgmaxRows<D, 8192>> argmax_;
  Handle<ops::SampleRows<D, 1024>> sample_;
};

} // namespace kiln::nn
