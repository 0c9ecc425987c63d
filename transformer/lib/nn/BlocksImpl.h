//===- BlocksImpl.h - the definitions of the blocks' heavy members ---------===//
//
// kiln/nn/blocks.hpp declares the blocks and defines their small members;
// the members that ask for kernels, tune them and launch them (with every
// kernel type and tuning space they name) are defined here, and compiled
// once per element type by the instantiation files beside this one
// (Linear.cpp, NormLinear.cpp, Attention.cpp, Blocks.cpp, for f32, f16 and
// bf16). A program that uses the blocks links KilnNN and compiles none of
// this.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/nn/blocks.hpp"

namespace kiln::nn {

template <class D>
void Embedding<D>::operator()(Context &ctx, const Tensor<i32> &tokens, const Tensor<i32> &positions,
                  const Tensor<D> &out) const {
    int64_t R = tokens.dim(0), C = features();
    expect(tokens, {kAny}, "nn::Embedding", "tokens");
    expect(positions, {R}, "nn::Embedding", "positions");
    expect(out, {R, C}, "nn::Embedding", "out");
    if (auto *t = tuned_.find(R))
      return (*t)(*this, ctx, tokens, positions, out);
    launch(kernel_.kernel(), ctx, tokens, positions, out);
  }

template <class D>
void Embedding<D>::tune(Context &ctx, const Tensor<i32> &tokens, const Tensor<i32> &positions, const Tensor<D> &out,
            bool cached_only) {
    auto site = []<class K>(const Kernel<K> &k, const Embedding &self, Context &c, const Tensor<i32> &t,
                            const Tensor<i32> &p, const Tensor<D> &o) { self.launch(k, c, t, p, o); };
    tuned_.tune(tokens.dim(0), [&](auto &into, int64_t bucket) {
      std::string key = "embedding " + std::to_string(bucket) + "x" + std::to_string(features());
      return into.tune(ctx, detail::rowSpace<ops::Embedding, D>(tuning::kRowWarps), "embedding", key,
                       cached_only, site, *this, ctx, tokens, positions, out);
    });
  }

template <class D>
LayerNorm<D>::LayerNorm(Context &ctx, Tensor<D> weight, Tensor<D> bias, float eps)
    : weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps) {
    expect(weight_, {kAny}, "nn::LayerNorm", "weight");
    expect(bias_, {features()}, "nn::LayerNorm", "bias");
    if (features() > 2048)
      throw Error("nn::LayerNorm: " + std::to_string(features()) +
                  " features is wider than the layernorm kernel (2048)");
    if (features() <= 1024)
      narrow_ = ctx.kernel<ops::LayerNorm<D, 1024, true>>("layernorm");
    else
      wide_ = ctx.kernel<ops::LayerNorm<D, 2048, true>>("layernorm");
  }

template <class D>
void LayerNorm<D>::operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &y) const {
    int64_t C = features();
    expect(x, {kAny, C}, "nn::LayerNorm(" + std::to_string(C) + ")", "x");
    expect(y, {x.dim(0), C}, "nn::LayerNorm(" + std::to_string(C) + ")", "y");
    if (auto *t = tuned_.find(x.dim(0)))
      return (*t)(*this, ctx, x, y);
    if (narrow_)
      launch(narrow_->kernel(), ctx, x, y);
    else
      launch(wide_->kernel(), ctx, x, y);
  }

template <class D>
void LayerNorm<D>::tune(Context &ctx, const Tensor<D> &x, const Tensor<D> &y, bool cached_only) {
    auto site = []<class K>(const Kernel<K> &k, const LayerNorm &self, Context &c, const Tensor<D> &xx,
                            const Tensor<D> &yy) { self.launch(k, c, xx, yy); };
    tuned_.tune(x.dim(0), [&](auto &t, int64_t bucket) {
      std::string key = "layernorm " + std::to_string(bucket) + "x" + std::to_string(features());
      return narrow_ ? t.tune(ctx, space<1024>(), "layernorm", key, cached_only, site, *this, ctx, x, y)
                     : t.tune(ctx, space<2048>(), "layernorm", key, cached_only, site, *this, ctx, x, y);
    });
  }

template <class D, Epilogue E>
Linear<D, E>::Linear(Context &ctx, Tensor<D> weight, Tensor<D> bias, Tensor<D> weight_t,
         LinearOptions options)
    : weight_(std::move(weight)), bias_(std::move(bias)), weightT_(std::move(weight_t)),
        options_(std::move(options)), gpu_(ctx.gpu()) {
    expect(weight_, {kAny, kAny}, "nn::Linear", "weight");
    name_ = detail::shapeName("nn::Linear", in_features(), out_features());
    if constexpr (!kPlain)
      expect(bias_, {out_features()}, name_, "bias");
    const std::string &role = options_.role;
    if (gpu_) {
      CompileOptions big, small;
      if constexpr (kF32) {
        big.num_warps = 8;
        big.num_stages = 2;
      } else if constexpr (!kPlain) {
        big.num_warps = 4;
        big.num_stages = 3;
      }
      if constexpr (!kPlain)
        small.num_stages = 3;
      big_ = ctx.kernel<Big>(role, big);
      small_ = ctx.kernel<Small>(role + "_small", small);
    } else {
      cpu_ = ctx.kernel<Cpu>(role);
      if constexpr (kPlain)
        cpuFew_ = ctx.kernel<CpuFew>(role + "_few");
    }
    detail::checkFewRows(options_.few_rows, kFewRows, name_);
    detail::checkFewRows(options_.many_rows, kManyRows, name_, "many_rows");
    if (!weightT_.empty())
      expect(weightT_, {out_features(), in_features()}, name_, "weight_t");
    if (detail::fewRowsFor<D>(options_.few_rows, !weightT_.empty()))
      prepareFew(ctx);
    if (detail::fewRowsFor<D>(options_.many_rows, !weightT_.empty()))
      prepareMany(ctx);
    if (options_.decode_rows > 0 && !weightT_.empty())
      requestDecode(ctx);
  }

template <class D, Epilogue E>
void Linear<D, E>::tune(Context &ctx, const Tensor<D> &x, const Tensor<D> &out, bool cached_only) {
    expect(x, {kAny, in_features()}, name_, "x");
    expect(out, {x.dim(0), out_features()}, name_, "out");
    int64_t M = x.dim(0), bucket = rows_bucket(M);
    if (decodes(M) || few(M) || many(M) || tuned_.count(bucket))
      return;
    std::map<std::string, TunedLaunch> launchers;
    auto tuneIn = [&](auto candidates) {
      tuning::for_each_candidate(candidates, ctx.target(), [&]<class K>(const CompileOptions &, const std::string &label) {
        launchers[label] = [](const CompiledKernel &k, const Linear &self, Context &c, const Tensor<D> &xx,
                              const Tensor<D> *res, const Tensor<D> &o) {
          c.launch_as(self.options_.role, [&] {
            self.withMatmulArgs<K>(xx, res, o, [&](const Grid &g, const auto &...a) {
              static_cast<const Kernel<K> &>(k).launch(g, a...);
            });
          });
        };
      });
      std::string key = options_.role + " " + std::to_string(bucket) + "x" +
                        std::to_string(in_features()) + "x" + std::to_string(out_features());
      auto launch = [this, x, out](const auto &k) {
        using K = typename std::decay_t<decltype(k)>::kernel_type;
        withMatmulArgs<K>(x, &out, out, [&](const Grid &g, const auto &...a) { k.launch(g, a...); });
      };
      return ctx.tuned(key + " " + typeid(Big).name() + (cached_only ? " cached" : ""),
                       options_.role, [&]() -> std::optional<Tuned> {
                         if (cached_only)
                           return tuning::cached(candidates, ctx.target(), key, launch);
                         return tuning::autotune(candidates, ctx.target(), key, launch);
                       });
    };
    auto spaces = space();
    std::shared_ptr<const Tuned> t =
        gpu_ ? tuneIn(boost::hana::first(spaces)) : tuneIn(boost::hana::second(spaces));
    if (!t)
      return;
    auto found = launchers.find(t->label());
    if (found == launchers.end())
      throw Error(name_ + ": the tuned kernel " + t->label() + " is not in this block's space");
    tuned_[bucket] = {t, found->second};
  }

template <class D, Epilogue E>
void Linear<D, E>::requestDecode(Context &ctx) {
    const auto DE = E;
    const int K = int(in_features());
    // One row: 8 output columns a program for wide outputs (more programs
    // than multiprocessors either way), 4 for narrow ones, as ranked on an
    // H200.
    bool wide = out_features() > in_features();
    detail::forDecodeLadder(detail::decodeRowsOf(options_.decode_rows), [&](int R) {
      ops::with_decode_columns(detail::decodeColumnsFor<D>(R, K, false, wide ? 8 : 4), [&]<int BN>() {
        ops::DecodeLinear<D, BN> config{.rows = R, .k = K, .ln = false, .epilogue = DE};
        auto k = ctx.kernel(options_.role + detail::decodeSuffix(R), {}, config);
        decode_[std::size_t(detail::decodeSlot(R))] = [k](const Linear &self, Context &c, const Tensor<D> &x,
                                                          const Tensor<D> *res, const Tensor<D> &out) {
          self.launchDecode(c, k, x, res, out);
        };
      });
    });
    decodeTuner_ = [](Linear &self, Context &c, const Tensor<D> &x, const Tensor<D> &out, bool cachedOnly) {
      auto site = []<class KK>(const Kernel<KK> &k, const Linear &s, Context &cc, const Tensor<D> &xx,
                               const Tensor<D> *res, const Tensor<D> &o) {
        cc.launch_as(s.options_.role + detail::decodeSuffix(k.object().rows), [&] {
          s.withDecodeArgs<KK>(xx, res, o, [&](const Grid &g, const auto &...a) { k.launch(g, a...); });
        });
      };
      if (!self.decodes(x.dim(0)))
        return;
      int slot = detail::decodeSlot(x.dim(0));
      DecodeSite &into = self.tunedDecode_[std::size_t(slot)];
      if (into)
        return;
      const int R = detail::decodeRowsAt(slot), K = int(self.in_features());
      const Tensor<D> *res = E == Epilogue::BiasResidual ? &out : nullptr;
      std::string role = self.options_.role + detail::decodeSuffix(R);
      auto space = detail::decodeSpace<ops::DecodeLinear, D>([&](auto &k) {
        k.rows = R;
        k.k = K;
        k.epilogue = E;
      });
      into.chained(detail::kDecodeChain)
          .tune(c, space, role, detail::productKey(role, x.dim(0), K, self.out_features()), cachedOnly, site, self,
                c, x, res, out);
    };
  }

template <class D, Epilogue E>
void Linear<D, E>::prepareMany(Context &ctx) {
    detail::withManyPanels([&]<int BR, int BN, int KC, int C>(int warps) {
      if (BR > 32 && options_.many_rows <= 32)
        return;
      std::size_t i = BR <= 32 ? 0 : 1;
      auto plan = i == 0 ? &Linear::manyPlan32_ : &Linear::manyPlan64_;
      prepareRows<BR, BN, KC, C>(ctx, warps, "_many", many_[i], plan);
    });
  }

template <class D, Epilogue E>
void Linear<D, E>::run(Context &ctx, const Tensor<D> &x, const Tensor<D> *res, const Tensor<D> &out) const {
    expect(x, {kAny, in_features()}, name_, "x");
    expect(out, {x.dim(0), out_features()}, name_, "out");
    int64_t M = x.dim(0), N = out_features();
    if (decodes(M)) {
      auto slot = std::size_t(detail::decodeSlot(M));
      return tunedDecode_[slot] ? tunedDecode_[slot](*this, ctx, x, res, out) : decode_[slot](*this, ctx, x, res, out);
    }
    if (few(M))
      return few_(*this, ctx, x, res, out);
    if (many(M))
      return many_[M <= 32 ? 0 : 1](*this, ctx, x, res, out);
    if (auto t = tuned_.find(rows_bucket(M)); t != tuned_.end())
      return t->second.launch(t->second.tuned->kernel(), *this, ctx, x, res, out);
    if (!gpu_)
      return kPlain && M <= 16 ? launchMatmul(ctx, *cpuFew_, x, res, out)
                               : launchMatmul(ctx, *cpu_, x, res, out);
    bool few = kPlain ? M <= 16 : int64_t(ceil_div(M, 64)) * ceil_div(N, 64) < kFewTiles;
    if (few)
      launchMatmul(ctx, *small_, x, res, out);
    else
      launchMatmul(ctx, *big_, x, res, out);
  }

template <class D, Epilogue E>
detail::FewRowsNorm<D, E>::FewRowsNorm(Context &ctx, const std::string &role, int64_t N, int64_t K) {
    withFewNormPanel(N, [&]<int BN, int KC, int C>(int warps) {
      using F = ops::FewRowsNormLinear<D, kFewRows, BN, KC, C, E>;
      CompileOptions options;
      options.num_warps = warps;
      auto k = ctx.kernel<F>(role + "_ln_few", options);
      launch_ = [k](const FewRowsNorm &self, Context &c, const LayerNorm<D> &ln, const Tensor<D> &wt,
                    const Tensor<D> &bias, const Tensor<D> &x, const Tensor<D> &out, const Prefetch<D> &pf) {
        const FewRowsPlan &p = self.plan_;
        k(c, p.grid(), x.data(), ln.weight().data(), ln.bias().data(), wt.data(),
          bias.empty() ? x.data() : bias.data(), out.data(), p.partial.data(), p.counter.data(), int(x.dim(0)),
          int(wt.dim(0)), int(wt.dim(1)), ln.eps(), pf.ptr(wt.data()), pf.count());
      };
      plan_ = FewRowsPlan(ctx.target(), N, K, BN, C * KC, kFewRows);
    });
  }

template <class D, Epilogue E>
NormLinear<D, E>::NormLinear(Context &ctx, LayerNorm<D> ln, Tensor<D> weight, Tensor<D> bias, Tensor<D> weight_t,
             LinearOptions options)
    : ln_(std::move(ln)),
        linear_(ctx, std::move(weight), std::move(bias), weight_t,
                LinearOptions{options.role, 0, fusesFew(options, weight_t) ? 0 : options.few_rows, false,
                              options.many_rows}),
        role_(options.role) {
    if (ln_.features() != linear_.in_features())
      throw Error("nn::NormLinear: a layernorm of " + std::to_string(ln_.features()) +
                  " features before " + linear_.name());
    detail::checkFewRows(options.few_rows, kFewRows, linear_.name());
    if constexpr (E != Epilogue::BiasResidual)
      if (fusesFew(options, weight_t)) {
        few_ = detail::FewRowsNorm<D, E>(ctx, options.role, linear_.out_features(), linear_.in_features());
        fewRows_ = options.few_rows;
      }
    if (options.decode_rows > 0 && !weight_t.empty()) {
      weightT_ = std::move(weight_t);
      decodeRows_ = detail::decodeRowsOf(options.decode_rows);
      const auto DE = E;
      const int K = int(linear_.in_features());
      using Launch = std::function<void(const NormLinear &, Context &, const Tensor<D> &, const Tensor<D> &)>;
      std::array<Launch, detail::kDecodeSlots> kernels;
      detail::forDecodeLadder(decodeRows_, [&](int R) {
        ops::with_decode_columns(detail::decodeColumnsFor<D>(R, K, true, 8), [&]<int BN>() {
          ops::DecodeLinear<D, BN> config{.rows = R, .k = K, .ln = true, .epilogue = DE};
          auto k = ctx.kernel(options.role + detail::decodeSuffix(R), {}, config);
          kernels[std::size_t(detail::decodeSlot(R))] = [k](const NormLinear &self, Context &c, const Tensor<D> &x,
                                                            const Tensor<D> &out) { self.launch(c, k, x, out); };
        });
      });
      decode_ = [kernels](const NormLinear &self, Context &c, const Tensor<D> &x, const Tensor<D> &out) {
        auto slot = std::size_t(detail::decodeSlot(x.dim(0)));
        self.tuned_[slot] ? self.tuned_[slot](self, c, x, out) : kernels[slot](self, c, x, out);
      };
      decodeTuner_ = [](NormLinear &self, Context &c, const Tensor<D> &x, const Tensor<D> &out, bool cachedOnly) {
        auto site = []<class KK>(const Kernel<KK> &k, const NormLinear &s, Context &cc, const Tensor<D> &xx,
                                 const Tensor<D> &o) {
          cc.launch_as(s.role_ + detail::decodeSuffix(k.object().rows), [&] {
            s.withArgs<KK>(xx, o, [&](const Grid &g, const auto &...a) { k.launch(g, a...); });
          });
        };
        if (x.dim(0) < 1 || x.dim(0) > self.decodeRows_)
          return;
        int slot = detail::decodeSlot(x.dim(0));
        Site &into = self.tuned_[std::size_t(slot)];
        if (into)
          return;
        const int R = detail::decodeRowsAt(slot), K = int(self.linear_.in_features());
        std::string role = self.role_ + detail::decodeSuffix(R);
        auto space = detail::decodeSpace<ops::DecodeLinear, D>([&](auto &k) {
          k.rows = R;
          k.k = K;
          k.ln = true;
          k.epilogue = E;
        });
        into.chained(detail::kDecodeChain)
            .tune(c, space, role, detail::productKey(role, x.dim(0), K, self.linear_.out_features()), cachedOnly,
                  site, self, c, x, out);
      };
    }
  }

template <class D>
CausalSelfAttention<D>::CausalSelfAttention(Context &ctx, LayerNorm<D> ln, Tensor<D> w_qkv, Tensor<D> b_qkv,
                      Tensor<D> w_qkv_t, Linear<D, Epilogue::BiasResidual> proj, int heads,
                      KvCache<D> cache, int decode_rows,
                      int few_rows, bool fuse_layernorm, int resident_keys,
                      int many_rows)
    : qkv_(ctx, std::move(ln), std::move(w_qkv), std::move(b_qkv), w_qkv_t,
             LinearOptions{"qkv", 0, fuse_layernorm ? 0 : few_rows, false, many_rows}),
        qkvT_(std::move(w_qkv_t)), proj_(std::move(proj)), heads_(heads), residentKeys_(resident_keys),
        cache_(std::move(cache)) {
    int64_t C = features();
    std::string name = "nn::CausalSelfAttention(" + std::to_string(C) + ")";
    expect(qkv_.linear().weight(), {C, 3 * C}, name, "w_qkv");
    if (proj_.in_features() != C || proj_.out_features() != C)
      throw Error(name + ": the projection is " + proj_.name());
    if (heads < 1 || C % heads != 0)
      throw Error(name + ": " + std::to_string(heads) + " heads do not divide " + std::to_string(C) +
                  " features");
    if (resident_keys < 0)
      throw Error(name + ": resident_keys must be >= 0 (got " + std::to_string(resident_keys) + ")");
    expect(cache_.k, {kAny, kAny, C}, name, "cache.k");
    expect(cache_.v, {cache_.batch(), cache_.context(), C}, name, "cache.v");
    kvWrite_ = ctx.kernel<ops::KvWrite<D, 256>>("kv_write");
    detail::checkFewRows(few_rows, kFewRows, name);
    if (!qkvT_.empty())
      expect(qkvT_, {3 * C, C}, name, "w_qkv_t");
    if (detail::fewRowsFor<D>(few_rows, !qkvT_.empty())) {
      if (fuse_layernorm)
        prepareFewQkv<true>(ctx);
      else
        prepareFewQkv<false>(ctx);
      fewRows_ = few_rows;
    }
    switch (head_dim()) {
    case 16: requestAttention<16>(ctx); break;
    case 32: requestAttention<32>(ctx); break;
    case 64: requestAttention<64>(ctx); break;
    case 128: requestAttention<128>(ctx); break;
    default:
      throw Error(name + ": head_dim " + std::to_string(head_dim()) + " (16, 32, 64 or 128)");
    }
    if (!qkvT_.empty()) {
      decodeRows_ = detail::decodeRowsOf(decode_rows);
      const int K = int(C);
      using Launch = std::function<void(const CausalSelfAttention &, Context &, const Tensor<D> &,
                                        const Tensor<i32> &, const Tensor<D> &)>;
      std::array<Launch, detail::kDecodeSlots> kernels;
      detail::forDecodeLadder(decodeRows_, [&](int R) {
        ops::with_decode_columns(detail::decodeColumnsFor<D>(R, K, true, 8), [&]<int BN>() {
          ops::DecodeQkv<D, BN> config{.rows = R, .k = K};
          auto k = ctx.kernel("decode_qkv" + std::to_string(R), {}, config);
          kernels[std::size_t(detail::decodeSlot(R))] = [k](const CausalSelfAttention &self, Context &c,
                                                            const Tensor<D> &x, const Tensor<i32> &pos,
                                                            const Tensor<D> &qkv) {
            self.launchDecodeQkv(c, k, x, pos, qkv);
          };
        });
      });
      decodeQkv_ = [kernels](const CausalSelfAttention &self, Context &c, const Tensor<D> &x,
                             const Tensor<i32> &pos, const Tensor<D> &qkv) {
        auto slot = std::size_t(detail::decodeSlot(x.dim(0)));
        self.qkvTuned_[slot] ? self.qkvTuned_[slot](self, c, x, pos, qkv) : kernels[slot](self, c, x, pos, qkv);
      };
      decodeQkvTuner_ = [](CausalSelfAttention &self, Context &c, const Tensor<D> &x, const Tensor<i32> &pos,
                           const Tensor<D> &qkv, bool cachedOnly) {
        auto site = []<class KK>(const Kernel<KK> &k, const CausalSelfAttention &a, Context &cc,
                                 const Tensor<D> &xx, const Tensor<i32> &p, const Tensor<D> &o) {
          cc.launch_as("decode_qkv" + std::to_string(k.object().rows), [&] {
            a.withDecodeQkvArgs<KK>(xx, p, o, [&](const Grid &g, const auto &...args) { k.launch(g, args...); });
          });
        };
        int64_t rows = x.dim(0);
        if (rows < 1 || rows > self.decodeRows_)
          return;
        int slot = detail::decodeSlot(rows);
        QkvSite &into = self.qkvTuned_[std::size_t(slot)];
        if (into)
          return;
        const int R = detail::decodeRowsAt(slot), K = int(self.features());
        std::string role = "decode_qkv" + std::to_string(R);
        auto space = detail::decodeSpace<ops::DecodeQkv, D>([&](auto &k) {
          k.rows = R;
          k.k = K;
        });
        into.chained(detail::kDecodeChain)
            .tune(c, space, role, detail::productKey(role, rows, K, 3 * K), cachedOnly, site, self, c, x, pos,
                  qkv.rows(0, rows));
      };
    }
  }

template <class D>
void CausalSelfAttention<D>::tune_decode(Context &ctx, const Tensor<D> &x, const Workspace<D> &ws, bool cached_only) {
    int64_t B = x.dim(0);
    if (decodeQkvTuner_ && B <= decodeRows_)
      decodeQkvTuner_(*this, ctx, x, ws.iota.rows(0, B), ws.qkv, cached_only);
    else if (!fewQkv(B))
      tuneCacheWrite(ctx, ws, B, cached_only);
    attentionTuner_(*this, ctx, ws, 0, B, &x, cached_only);
    proj_.tune_decode(ctx, ws.att.rows(0, B), x, cached_only);
  }

template <class D>
void CausalSelfAttention<D>::decode(Context &ctx, const Tensor<D> &x, const Tensor<i32> &pos, const Workspace<D> &ws,
              int64_t keys) const {
    int64_t B = x.dim(0);
    expect(pos, {B}, "nn::CausalSelfAttention", "pos");
    if (B > cache_.batch())
      throw Error("nn::CausalSelfAttention: " + std::to_string(B) + " sequences; the cache holds " +
                  std::to_string(cache_.batch()));
    expect(ws.parts, {kAny, heads_, kAny, head_dim() + 2}, "nn::CausalSelfAttention", "ws.parts");
    if (ws.parts.dim(0) < B || ws.parts.dim(2) < splits())
      throw Error("nn::CausalSelfAttention: ws.parts has shape " + to_string(ws.parts.shape()) +
                  "; this decode step needs at least [" + std::to_string(B) + ", " + std::to_string(heads_) +
                  ", " + std::to_string(splits()) + ", " + std::to_string(head_dim() + 2) +
                  "] (a Workspace of splits() splits)");
    decodeQkv(ctx, x, pos, ws);
    decodeAttention_(*this, ctx, ws, pos, B, keys);
    proj_(ctx, ws.att, x, x);
  }

template <class D>
void CausalSelfAttention<D>::decodeQkv(Context &ctx, const Tensor<D> &x, const Tensor<i32> &pos, const Workspace<D> &ws) const {
    int64_t B = x.dim(0);
    if (decodeQkv_ && B <= decodeRows_) {
      decodeQkv_(*this, ctx, x, pos, ws.qkv);
    } else if (fewQkv(B)) {
      fewQkv_(*this, ctx, x, pos, ws);
    } else {
      qkv_(ctx, x, ws.normed, ws.qkv);
      writeCache(ctx, ws.qkv.rows(0, B), ws.iota.rows(0, B), pos);
    }
  }

template <class D>
void CausalSelfAttention<D>::tuneCacheWrite(Context &ctx, const Workspace<D> &ws, int64_t rows, bool cachedOnly) {
    int64_t n = std::min(rows, cache_.context());
    if (n < 1)
      return;
    auto site = []<class K>(const Kernel<K> &k, const CausalSelfAttention &a, Context &c, const Tensor<D> &q,
                            const Tensor<i32> &s, const Tensor<i32> &p) { a.launchCacheWrite(k, c, q, s, p); };
    kvTuned_.tune(n, [&](auto &into, int64_t bucket) {
      Tensor<i32> seq(ctx.target(), {n});
      seq.copy_from(std::vector<int32_t>(std::size_t(n), 0));
      std::string key = "kv_write " + std::to_string(bucket) + "x" + std::to_string(features());
      return into.tune(ctx, detail::rowSpace<ops::KvWrite, D>(tuning::kRowWarps), "kv_write", key, cachedOnly,
                       site, *this, ctx, ws.qkv.rows(0, n), seq, ws.iota.rows(0, n));
    });
  }

template <class D>
Mlp<D>::Mlp(Context &ctx, NormLinear<D, Epilogue::BiasGelu> fc, Linear<D, Epilogue::BiasResidual> proj, int fused_rows)
    : Mlp(std::move(fc), std::move(proj)) {
    if (fused_rows == 0)
      return;
    std::string name = "nn::Mlp(" + fc_.linear().name() + ")";
    if (fused_rows != 1 && fused_rows != 2)
      throw Error(name + ": fused decode steps of 1 or 2 rows, not " + std::to_string(fused_rows));
    if constexpr (std::is_same_v<D, f32>)
      throw Error(name + ": the fused decode MLP takes 16-bit types");
    else {
      if (fc_.weight_t().empty())
        throw Error(name + ": the fused decode MLP needs the first product's [N, K] weight copy");
      int64_t C = fc_.linear().in_features();
      if (C % 64 != 0)
        throw Error(name + ": the fused decode MLP takes widths that are multiples of 64, not " +
                    std::to_string(C));
      CompileOptions options;
      options.num_warps = kFusedWarps;
      std::array<std::function<void(const Mlp &, Context &, const Tensor<D> &)>, 2> kernels;
      // Chunks of the largest of 256, 128 and 64 that divides the width.
      auto make = [&]<int KC>(int R) {
        ops::DecodeMlp<D, kFusedHidden, KC> config{.rows = R, .c = int(C)};
        auto k = ctx.kernel("mlp" + detail::decodeSuffix(R), options, config);
        kernels[std::size_t(R - 1)] = [k](const Mlp &self, Context &c, const Tensor<D> &x) {
          self.launchFused(c, k, x);
        };
      };
      for (int R = 1; R <= fused_rows; ++R) {
        if (C % kFusedChunk == 0)
          make.template operator()<kFusedChunk>(R);
        else if (C % 128 == 0)
          make.template operator()<128>(R);
        else
          make.template operator()<64>(R);
      }
      fused_ = [kernels](const Mlp &self, Context &c, const Tensor<D> &x) {
        kernels[std::size_t(x.dim(0) - 1)](self, c, x);
      };
      fusedRows_ = fused_rows;
      acc_ = Tensor<f32>(ctx.target(), {int64_t(fused_rows), C});
      counter_ = Tensor<i32>(ctx.target(), {1});
    }
  }

template <class D>
void GatherRows<D>::tune(Context &ctx, const Tensor<D> &src, const Tensor<i32> &index, const Tensor<D> &dst,
            bool cached_only) {
    auto site = []<class K>(const Kernel<K> &k, const GatherRows &self, Context &c, const Tensor<D> &s,
                            const Tensor<i32> &i, const Tensor<D> &d) { self.launch(k, c, s, i, d); };
    tuned_.tune(index.dim(0), [&](auto &into, int64_t bucket) {
      std::string key = "gather " + std::to_string(bucket) + "x" + std::to_string(src.dim(1));
      return into.tune(ctx, detail::rowSpace<ops::GatherRows, D>(tuning::kRowWarps), "gather", key,
                       cached_only, site, *this, ctx, src, index, dst);
    });
  }

template <class D>
void LmHead<D>::operator()(Context &ctx, const Tensor<D> &x, const Tensor<D> &normed, const Tensor<D> &logits) const {
    if (few_ && x.dim(0) >= 2 && x.dim(0) <= fewRows_) {
      expect(x, {kAny, linear_.in_features()}, linear_.name(), "x");
      expect(logits, {x.dim(0), vocab()}, linear_.name(), "logits");
      return few_(ctx, ln_, linear_.weight_t(), linear_.bias(), x, logits);
    }
    ln_(ctx, x, normed);
    linear_(ctx, normed, logits);
  }

template <class D>
void Sampler<D>::operator()(Context &ctx, const Tensor<D> &logits, const Tensor<i32> &next,
                  const Tensor<i32> &pos, int advance, const SampleOptions &o) const {
    int64_t R = next.dim(0);
    int V = int(logits.dim(1));
    expect(logits, {kAny, kAny}, "nn::Sampler", "logits");
    if (logits.dim(0) < R)
      throw Error("nn::Sampler: " + std::to_string(R) + " tokens from " +
                  std::to_string(logits.dim(0)) + " rows of logits");
    expect(pos, {R}, "nn::Sampler", "pos");
    if (!(o.temperature > 0) && argmaxTuned_)
      argmaxTuned_(*this, ctx, logits, next, pos, advance);
    else if (!(o.temperature > 0))
      argmax_(ctx, Grid(uint32_t(R)), logits.data(), next.data(), pos.data(), V, V, advance);
    else
      sample_(ctx, Grid(uint32_t(R)), logits.data(), next.data(), pos.data(), V, V, advance,
              o.temperature, o.top_k, o.top_p, int(o.seed));
  }

template <class D>
void Sampler<D>::tune(Context &ctx, const Tensor<D> &logits, const Tensor<i32> &next, const Tensor<i32> &pos,
            bool cached_only) {
    if (argmaxTuned_)
      return;
    namespace hana = boost::hana;
    auto space = tuning::product(
        hana::tuple_t<ops::ArgmaxRows<D, 2048>, ops::ArgmaxRows<D, 4096>, ops::ArgmaxRows<D, 8192>>,
        tuning::kWarps, tuning::kNoStages, tuning::kPlainOnly);
    auto site = []<class K>(const Kernel<K> &k, const Sampler &, Context &c, const Tensor<D> &l,
                            const Tensor<i32> &n, const Tensor<i32> &p, int advance) {
      c.launch_as("argmax", [&] {
        int V = int(l.dim(1));
        k.launch(Grid(uint32_t(n.dim(0))), l.data(), n.data(), p.data(), V, V, advance);
      });
    };
    std::string key = "argmax " + std::to_string(next.dim(0)) + "x" + std::to_string(logits.dim(1));
    argmaxTuned_.tune(ctx, space, "argmax", key, cached_only, site, *this, ctx,
                      logits.rows(0, next.dim(0)), next, pos, 0);
  }

} // namespace kiln::nn
