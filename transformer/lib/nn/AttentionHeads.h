//===- AttentionHeads.h - causal self-attention's kernels of a head size ---===//
//
// CausalSelfAttention::requestAttention<HD>: the attention kernels of one
// head dimension (a tile shape of every attention kernel) and their tuning.
// Each (element type, head dimension) is compiled in a file of its own
// (AttentionF16Head64.cpp, ...).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/nn/blocks.hpp"

namespace kiln::nn {

template <class D>
template <int HD>
void CausalSelfAttention<D>::requestAttention(Context &ctx) {
  auto pre = ctx.kernel<ops::AttentionPrefill<D, 64, 64, HD>>("attention_prefill");
  // Untuned, 2 warps: on sm_90 and newer 32-key blocks over the 4
  // programs of a thread-block cluster, merged in its shared memory
  // (H200, chained: 2.9 us a launch against 3.7 at 128 keys, batch 1; 4.1
  // against 5.4 at batch 8); elsewhere 16-key blocks over up to 16
  // programs a head, merged through global memory. Steps of one sequence
  // in length buckets of up to residentKeys_ keys, where there are
  // clusters (and on the CPU): ResidentDecode, the keys and values of the
  // first 4 blocks loaded before the wait (H100, GPT-2 124M: batch-1
  // steps 4-5% faster at prompt 64, 3% at 256; at batch 8 1% and 6%
  // slower, so batches keep the split kernels; bench/README.md).
  CompileOptions two;
  two.num_warps = 2;
  auto untuned = [&]<class Decode>(bool resident) {
    auto dec = ctx.kernel<Decode>("attention_decode", two);
    using Resident = ResidentDecode<HD>;
    std::optional<Handle<Resident>> res;
    if (resident && residentKeys_ > 0)
      res = ctx.kernel<Resident>("attention_decode", residentOptions<Resident>());
    decodeAttention_ = [dec, res](const CausalSelfAttention &a, Context &c, const Workspace<D> &ws,
                                  const Tensor<i32> &pos, int64_t B, int64_t keys) {
      int64_t bucket = a.decode_bucket(keys);
      if (auto t = a.decodeTuned_.find({B, bucket}); t != a.decodeTuned_.end())
        return t->second(a, c, ws, pos, B, nullptr);
      auto launch = [&]<class K>(const Handle<K> &k) {
        k(c, K::grid(B, a.heads_), ws.qkv.data(), a.cache_.k.data(), a.cache_.v.data(), ws.parts.data(),
          ws.counter.data(), ws.att.data(), pos.data(), int(a.features()), int(a.cache_.context()), a.scale());
      };
      if (res && B == 1 && bucket <= a.residentKeys_)
        launch(*res);
      else
        launch(dec);
    };
  };
  // On the CPU a cluster's programs are threads of their own; GPUs
  // without clusters take the split kernels at every length.
  if (ctx.target().kind == Target::Kind::Cuda && ctx.target().has_clusters())
    untuned.template operator()<ops::AttentionDecodeCluster<D, 32, HD, 4>>(true);
  else
    untuned.template operator()<ops::AttentionDecode<D, 16, HD, 16>>(ctx.target().has_clusters());
  attentionTuner_ = [](CausalSelfAttention &self, Context &c, const Workspace<D> &ws, int64_t rows,
                       int64_t B, const Tensor<D> *x, bool cachedOnly) {
    const Target &t = c.target();
    std::string shape = std::to_string(self.heads_) + "x" + std::to_string(HD);
    int len = int(std::min<int64_t>(rows, self.cache_.context()));
    if (rows > 0)
      self.prefillTuned_.tune(len, [&](auto &into, int64_t bucket) {
        // One prompt of `rows` tokens (at most the cache's length) in sequence 0.
        Packing p;
        p.starts = Tensor<i32>(t, {1});
        p.lengths = Tensor<i32>(t, {1});
        p.starts.copy_from(std::vector<int32_t>{0});
        p.lengths.copy_from(std::vector<int32_t>{len});
        p.prompts = 1;
        p.longest = len;
        auto site = []<class K>(const Kernel<K> &k, const CausalSelfAttention &a, Context &cc,
                                const Tensor<D> &qkv, const Tensor<D> &att, const Packing &pk) {
          a.launchPrefillAttention(k, cc, qkv, att, pk);
        };
        std::string key = "attention_prefill " + std::to_string(bucket) + "x" + shape;
        return into.tune(c, prefillSpace<HD>(), "attention_prefill", key, cachedOnly, site, self, c, ws.qkv,
                         ws.att, p);
      });
    if (B > 0) {
      int64_t n = std::min(B, self.cache_.batch());
      // Each candidate is timed after the step's QKV launch, as it runs in
      // a step: what it loads before its wait overlaps that kernel, and
      // its programs become resident beside that kernel's, not beside
      // another attention launch's.
      auto site = []<class K>(const Kernel<K> &k, const CausalSelfAttention &a, Context &cc,
                              const Workspace<D> &w, const Tensor<i32> &ps, int64_t b,
                              const Tensor<D> *after) {
        if (after)
          a.decodeQkv(cc, *after, ps, w);
        a.launchDecodeAttention(k, cc, w, ps, b);
      };
      Tensor<D> xRows = x ? x->rows(0, n) : Tensor<D>();
      const Tensor<D> *after = x ? &xRows : nullptr;
      // Each length bucket is tuned with every sequence in the middle of
      // it (keys (lo + hi) / 2 for the bucket (lo, hi]).
      int64_t lo = 0;
      for (int64_t hi : self.decode_buckets()) {
        int64_t keys = std::max<int64_t>(1, (lo + hi) / 2);
        lo = hi;
        if (self.decodeTuned_.count({n, hi}))
          continue;
        Tensor<i32> pos(t, {n});
        pos.copy_from(std::vector<int32_t>(std::size_t(n), int32_t(keys - 1)));
        std::string key = "attention_decode " + std::to_string(n) + "x" + std::to_string(keys) + "of" +
                          std::to_string(self.cache_.context()) + "x" + shape + (x ? " after qkv" : "");
        DecodeSite into;
        // Cluster kernels only where there are clusters.
        auto tune = [&](auto space) {
          return into.chained(detail::kDecodeChain)
              .tune(c, space, "attention_decode", key, cachedOnly, site, self, c, ws, pos, n, after);
        };
        if (tune(decodeSpace<HD>(t.has_clusters())))
          self.decodeTuned_[{n, hi}] = into;
      }
    }
  };
  prefillAttention_ = [pre](const CausalSelfAttention &a, Context &c, const Tensor<D> &qkv,
                            const Tensor<D> &att, const Packing &p) {
    if (auto *t = a.prefillTuned_.find(p.longest))
      return (*t)(a, c, qkv, att, p);
    pre(c, Grid(ceil_div(p.longest, 64), uint32_t(a.heads_), uint32_t(p.prompts)), qkv.data(),
        a.cache_.k.data(), a.cache_.v.data(), att.data(), p.starts.data(), p.lengths.data(),
        int(a.features()), int(a.cache_.context()), a.scale());
  };
}

} // namespace kiln::nn
