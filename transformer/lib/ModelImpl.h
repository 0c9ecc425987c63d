//===- ModelImpl.h - GPT-2 made of kiln::nn blocks -------------------------===//
//
// The model is an embedding, n_layer transformer blocks and a tied LM head
// (kiln/nn/blocks.hpp). A generation is one packed prefill of every prompt,
// then decode steps of one row per sequence, each captured once as a CUDA
// graph: prefill() and decodeStep() below read top to bottom as the forward
// pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ModelBase.h"

#include "Memory.h"
#include "Parallel.h"

#include "kiln/nn/blocks.hpp"
#include "kiln/runtime/cuda.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <utility>


namespace kiln::gpt2::impl {


using nn::Epilogue;

/// GPT-2 in D (f32, f16, bf16), made of kiln::nn blocks. Shapes: B
/// sequences (max_batch), T positions each (Tmax, the KV cache's length), R
/// rows (a packed prefill: up to B * T; a decode step: B), C = n_embd,
/// V = vocab_size.
template <class D> struct ModelImpl final : Model::Impl {
  using H = typename D::host;
  template <class E> using Tensor = nn::Tensor<E>;

  nn::Context ctx;
  std::optional<nn::Embedding<D>> embedding; // wte [V, C], wpe [n_ctx, C]
  std::vector<nn::TransformerBlock<D>> layers;
  std::optional<nn::LmHead<D>> lmHead;       // ln_f, then x @ wte^T
  std::optional<nn::GatherRows<D>> gather;
  std::optional<nn::Sampler<D>> sampler;

  Tensor<D> x;          // [B*T, C] the residual stream
  nn::Workspace<D> ws;  // [B*T, ...] activations the layers share
  Tensor<D> logitsBuf;  // [max(T, B), V]
  Tensor<i32> tok;      // [B*T] a prefill's tokens
  Tensor<i32> rowSeq, rowPos, starts, lengths, lastRows; // a packed prefill
  Tensor<i32> next, pos; // [B] a decode step's tokens and positions, on the device

  std::set<std::pair<int64_t, int64_t>> configured; // row buckets configureFor has seen
  std::set<int64_t> configuredDecode;               // batch sizes configureDecode has seen
  std::map<int64_t, cuda::Graph> graphs; // decode-step graphs by tuned attention length bucket (0: untuned)
  std::string graphKey;                  // what they bake in besides the bucket
  std::unique_ptr<cuda::Stream> stream;

  /// `t` in the compute type; as [N, K] when `transposed` (t is [K, N]),
  /// in 32 x 32 tiles so that both sides are read and written a cache line
  /// at a time.
  static std::vector<H> hostCopy(const gpt2::Tensor &t, bool transposed = false) {
    std::vector<H> out(t.data.size());
    if (!transposed) {
      parallelFor(int64_t(out.size()), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          out[std::size_t(i)] = H(t.data[std::size_t(i)]);
      });
      return out;
    }
    int64_t K = t.shape.at(0), N = t.shape.at(1);
    constexpr int64_t kTile = 32;
    parallelFor(
        ceil_div(N, kTile),
        [&](int64_t begin, int64_t end) {
          for (int64_t nb = begin; nb < end; ++nb)
            for (int64_t k0 = 0; k0 < K; k0 += kTile)
              for (int64_t n = nb * kTile; n < std::min(N, (nb + 1) * kTile); ++n)
                for (int64_t k = k0; k < std::min(K, k0 + kTile); ++k)
                  out[std::size_t(n * K + k)] = H(t.data[std::size_t(k * N + n)]);
        },
        1);
    return out;
  }

  /// A layer's parameters in the compute type (ln_1 w, b; attn W, b; proj
  /// W, b; ln_2 w, b; fc W, b; mlp proj W, b), then, for decode steps, its
  /// four matrices again as [N, K].
  static std::vector<std::vector<H>> hostLayer(const LayerWeights &lw, bool decodeCopies) {
    std::vector<std::vector<H>> out;
    for (const gpt2::Tensor *t : {&lw.ln_1_w, &lw.ln_1_b, &lw.c_attn_w, &lw.c_attn_b, &lw.c_proj_w,
                                  &lw.c_proj_b, &lw.ln_2_w, &lw.ln_2_b, &lw.c_fc_w, &lw.c_fc_b,
                                  &lw.mlp_proj_w, &lw.mlp_proj_b})
      out.push_back(hostCopy(*t));
    if (decodeCopies)
      for (const gpt2::Tensor *t : {&lw.c_attn_w, &lw.c_proj_w, &lw.c_fc_w, &lw.mlp_proj_w})
        out.push_back(hostCopy(*t, /*transposed=*/true));
    return out;
  }

  Tensor<D> upload(const std::vector<H> &host, nn::Shape shape) {
    return Tensor<D>(target, std::move(shape), std::span<const H>(host));
  }

  /// One transformer block from its host parameters (hostLayer's order),
  /// with decode-step kernels when `decode` (p then holds the [N, K] copies).
  nn::TransformerBlock<D> makeLayer(const std::vector<std::vector<H>> &p, int B, bool decode) {
    int64_t C = cfg.n_embd;
    // The decode-step kernels' ladder up to decode_kernel_rows rows, and
    // no further than the count that covers max_batch sequences.
    int rows = std::min(opts.decode_kernel_rows, nn::detail::decodeRowsHolding(B));
    int few = opts.few_row_products, many = opts.many_row_products;
    auto decodeCopy = [&](std::size_t i, nn::Shape s) { return decode ? upload(p.at(i), s) : Tensor<D>{}; };
    nn::LayerNorm<D> ln1(ctx, upload(p[0], {C}), upload(p[1], {C}));
    nn::Linear<D, Epilogue::BiasResidual> attnProj(ctx, upload(p[4], {C, C}), upload(p[5], {C}),
                                                   decodeCopy(13, {C, C}), {"attn_proj", rows, few, false, many});
    nn::CausalSelfAttention<D> attn(ctx, std::move(ln1), upload(p[2], {C, 3 * C}),
                                    upload(p[3], {3 * C}), decodeCopy(12, {3 * C, C}),
                                    std::move(attnProj), cfg.n_head,
                                    nn::KvCache<D>(target, B, Tmax, C), rows, few, opts.few_row_fusion,
                                    opts.resident_attention_keys, many);
    nn::LayerNorm<D> ln2(ctx, upload(p[6], {C}), upload(p[7], {C}));
    nn::NormLinear<D, Epilogue::BiasGelu> fc(ctx, std::move(ln2), upload(p[8], {C, 4 * C}),
                                             upload(p[9], {4 * C}), decodeCopy(14, {4 * C, C}),
                                             {"fc_gelu", rows, few, opts.few_row_fusion, many});
    nn::Linear<D, Epilogue::BiasResidual> mlpProj(ctx, upload(p[10], {4 * C, C}),
                                                  upload(p[11], {C}), decodeCopy(15, {C, 4 * C}),
                                                  {"mlp_proj", rows, few, false, many});
    // The fused decode MLP for 16-bit types, where there are decode kernels.
    int fused = decode && !std::is_same_v<D, kiln::f32> ? std::min(opts.fused_mlp_rows, rows) : 0;
    return nn::TransformerBlock<D>(std::move(attn), nn::Mlp<D>(ctx, std::move(fc), std::move(mlpProj), fused));
  }

  /// Whether layers of embedding width C get decode-step kernels (and hence
  /// the [N, K] copies of their matrices): widths of whole 64-element
  /// groups, as GPT-2's four sizes (768, 1024, 1280, 1600) and the tests'
  /// 64. The kernels take the width as a value, not as a type.
  static bool decodeWidth(int64_t C) { return C % 64 == 0; }

  ModelImpl(const Weights &w, const Target &t, Precision p, ModelOptions o)
      : Impl(w.config, t, p, o), ctx(t) {
    cfg.validate();
    if (o.decode_kernel_rows != nn::detail::decodeRowsOf(o.decode_kernel_rows))
      throw Error("gpt2: decode_kernel_rows must be 0, 1, 2, 4 or 8 (got " + std::to_string(o.decode_kernel_rows) +
                  ")");
    if (o.fused_mlp_rows < 0 || o.fused_mlp_rows > 2)
      throw Error("gpt2: fused_mlp_rows must be 0, 1 or 2 (got " + std::to_string(o.fused_mlp_rows) + ")");
    if (o.resident_attention_keys < 0)
      throw Error("gpt2: resident_attention_keys must be >= 0 (got " + std::to_string(o.resident_attention_keys) +
                  ")");
    if (o.few_row_products < 0 || o.few_row_products > nn::kFewRows)
      throw Error("gpt2: few_row_products must be 0 to " + std::to_string(nn::kFewRows) + " (got " +
                  std::to_string(o.few_row_products) + ")");
    if (o.many_row_products < 0 || o.many_row_products > nn::kManyRows)
      throw Error("gpt2: many_row_products must be 0 to " + std::to_string(nn::kManyRows) + " (got " +
                  std::to_string(o.many_row_products) + ")");
    build(w);
  }

  void build(const Weights &w) {
    auto started = std::chrono::steady_clock::now();
    int64_t C = cfg.n_embd, V = cfg.vocab_size, B = std::max(1, opts.max_batch);
    const bool decodeCopies = decodeWidth(C);
    requireMemory(int(B), decodeCopies);
    // Host-side conversion (and transposition) of a few layers ahead runs
    // in parallel with the uploads of the current one.
    constexpr std::size_t kAhead = 4;
    std::vector<std::future<std::vector<std::vector<H>>>> ahead;
    auto schedule = [&](std::size_t i) {
      if (i < w.layers.size())
        ahead.push_back(std::async(std::launch::async, [&w, i, decodeCopies] {
          return hostLayer(w.layers[i], decodeCopies);
        }));
    };
    for (std::size_t i = 0; i < kAhead; ++i)
      schedule(i);
    Tensor<D> wte = upload(hostCopy(w.wte), {V, C});
    embedding.emplace(ctx, wte, upload(hostCopy(w.wpe), {cfg.n_ctx, C}));
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
      schedule(i + kAhead);
      layers.push_back(makeLayer(ahead[i].get(), int(B), decodeCopies));
    }
    nn::LayerNorm<D> lnf(ctx, upload(hostCopy(w.ln_f_w), {C}), upload(hostCopy(w.ln_f_b), {C}));
    lmHead.emplace(ctx, std::move(lnf), upload(hostCopy(w.wte, /*transposed=*/true), {C, V}),
                   decodeCopies ? wte : Tensor<D>{}, opts.few_row_products,
                   opts.few_row_fusion);
    if (opts.prefetch_weights)
      for (std::size_t i = 0; i < layers.size(); ++i)
        layers[i].set_decode_prefetch(i + 1 < layers.size() ? layers[i + 1].attention().weight_t()
                                                             : lmHead->weight_t());
    gather.emplace(ctx);
    sampler.emplace(ctx);

    // A packed prefill holds up to B prompts of up to Tmax tokens.
    int64_t rows = B * Tmax;
    const auto &attn = layers.front().attention();
    x = Tensor<D>(target, {rows, C});
    ws = nn::Workspace<D>(target, rows, C, B, cfg.n_head, attn.splits(), cfg.head_dim());
    logitsBuf = Tensor<D>(target, {std::max<int64_t>(Tmax, B), V});
    tok = Tensor<i32>(target, {rows});
    rowSeq = Tensor<i32>(target, {rows});
    rowPos = Tensor<i32>(target, {rows});
    starts = Tensor<i32>(target, {B});
    lengths = Tensor<i32>(target, {B});
    lastRows = Tensor<i32>(target, {B});
    next = Tensor<i32>(target, {B});
    pos = Tensor<i32>(target, {B});
    auto prepared = std::chrono::steady_clock::now();
    info.prepare_seconds = std::chrono::duration<double>(prepared - started).count();
    ctx.compile();
    recordKernels();
    info.compile_seconds = ctx.compile_seconds();
    info.kernels_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared).count();
  }

  void recordKernels() {
    info.kernels.clear();
    for (const nn::KernelRecord &k : ctx.kernels())
      info.kernels.push_back({k.name, k.role, k.compile_seconds, k.from_cache, k.num_warps,
                              k.num_stages, k.source});
    info.tuning_seconds = ctx.tuning_seconds();
  }

  /// Configures the prefill products for R packed rows (and the head for
  /// `headRows`): tunes them (Tuning::Tune) or looks up persisted winners
  /// (Tuning::Cached), once per row bucket. Tuning overwrites the
  /// activations, so it runs before a prefill writes them.
  void configureFor(int64_t R, int64_t headRows) {
    if (opts.tuning == Tuning::Heuristic)
      return;
    bool cachedOnly = opts.tuning == Tuning::Cached;
    using Head = nn::Linear<D, Epilogue::None>;
    int64_t rows = std::min(Head::rows_bucket(R), x.dim(0));
    int64_t head = std::min(Head::rows_bucket(headRows), std::min(ws.normed.dim(0), logitsBuf.dim(0)));
    if (configured.count({rows, head}))
      return;
    configured.insert({rows, head});
    nn::Workspace<D> w = ws.rows(rows);
    // Token ids and positions 0, 1, 2, ... (valid ones) for the row kernels.
    int64_t valid = std::min({rows, int64_t(Tmax), int64_t(cfg.vocab_size)});
    embedding->tune(ctx, ws.iota.rows(0, valid), ws.iota.rows(0, valid), x.rows(0, valid), cachedOnly);
    for (nn::TransformerBlock<D> &layer : layers)
      layer.tune(ctx, x.rows(0, rows), w, cachedOnly);
    int64_t gathered = std::min(head, rows);
    gather->tune(ctx, x.rows(0, rows), ws.iota.rows(0, gathered), ws.att.rows(0, gathered), cachedOnly);
    lmHead->tune(ctx, ws.normed.rows(0, head), logitsBuf.rows(0, head), cachedOnly);
    recordKernels();
  }

  /// Configures the kernels of decode steps of `B` sequences (the
  /// decode-step kernels for up to decode_kernel_rows sequences, attention
  /// and the head's layernorm): tunes them or looks up persisted winners,
  /// once per B. Tuning overwrites the activations and the caches, so it
  /// runs before the prefill that fills them.
  void configureDecode(int64_t B) {
    if (opts.tuning == Tuning::Heuristic || configuredDecode.count(B))
      return;
    configuredDecode.insert(B);
    bool cachedOnly = opts.tuning == Tuning::Cached;
    nn::Workspace<D> w = ws.rows(B);
    int64_t valid = std::min({B, int64_t(Tmax), int64_t(cfg.vocab_size)});
    embedding->tune(ctx, ws.iota.rows(0, valid), ws.iota.rows(0, valid), x.rows(0, valid), cachedOnly);
    for (nn::TransformerBlock<D> &layer : layers)
      layer.tune_decode(ctx, x.rows(0, B), w, cachedOnly);
    lmHead->tune_decode(ctx, ws.normed.rows(0, B), logitsBuf.rows(0, B), cachedOnly);
    sampler->tune(ctx, logitsBuf.rows(0, B), next.rows(0, B), pos.rows(0, B), cachedOnly);
    recordKernels();
  }

  /// Checks that the parameters, the KV cache and the activations for `B`
  /// sequences of Tmax tokens fit where they will live, before allocating.
  void requireMemory(int B, bool decodeCopies) const {
    const uint64_t C = uint64_t(cfg.n_embd), V = uint64_t(cfg.vocab_size),
                   L = uint64_t(cfg.n_layer), e = sizeof(H);
    const uint64_t rows = mulSat(uint64_t(B), uint64_t(Tmax));
    uint64_t elems = uint64_t(cfg.num_params()) + V * C; // and the head as [C, V]
    if (decodeCopies)
      elems += L * 12 * C * C;
    elems = addSat(elems, mulSat(2 * L * C, rows));                       // K and V caches
    elems = addSat(elems, mulSat(10 * C, rows));                          // x normed qkv att hidden
    elems = addSat(elems, mulSat(V, std::max<uint64_t>(uint64_t(Tmax), uint64_t(B)))); // logits
    uint64_t bytes = addSat(mulSat(elems, e), mulSat(rows, 16));          // and the row indices
    std::string what = "a model of " + cfg.describe() + " for " + std::to_string(B) +
                       " sequence(s) of " + std::to_string(Tmax) + " tokens";
    if (gpu)
      requireDeviceMemory(bytes, what);
    else
      requireHostMemory(bytes, what);
  }


  void checkPrompt(const std::vector<int32_t> &tokens) const {
    if (tokens.empty())
      throw Error("gpt2: empty prompt");
    if (int(tokens.size()) >= Tmax)
      throw Error("gpt2: the prompt has " + std::to_string(tokens.size()) +
                  " tokens; the context holds " + std::to_string(Tmax) +
                  " (prompt plus new tokens)");
    for (int32_t t : tokens)
      if (t < 0 || t >= cfg.vocab_size)
        throw Error("gpt2: token id " + std::to_string(t) + " is outside the vocabulary (" +
                    std::to_string(cfg.vocab_size) + ")");
  }

  /// Runs every prompt (sequence b = prompts[b]) in one packed pass: their
  /// rows one after another, each at positions 0 .. T_b - 1. Leaves the
  /// logits of each prompt's last row in logitsBuf rows 0 .. n-1, or of
  /// every row of a single prompt when `allLogits`.
  void prefill(const std::vector<std::vector<int32_t>> &prompts, bool allLogits) {
    int n = int(prompts.size()), longest = 0;
    std::vector<int32_t> toks, seq, at, first, len, last;
    for (int b = 0; b < n; ++b) {
      const auto &p = prompts[std::size_t(b)];
      first.push_back(int32_t(toks.size()));
      len.push_back(int32_t(p.size()));
      last.push_back(int32_t(toks.size() + p.size() - 1));
      longest = std::max(longest, int(p.size()));
      for (std::size_t t = 0; t < p.size(); ++t) {
        toks.push_back(p[t]);
        seq.push_back(b);
        at.push_back(int32_t(t));
      }
    }
    int64_t R = int64_t(toks.size());
    configureFor(R, allLogits ? R : n);
    if (n > opts.decode_kernel_rows)
      configureFor(n, n); // the decode steps of these n sequences run the products too
    nn::Packing packing{rowSeq.rows(0, R), rowPos.rows(0, R), starts.rows(0, n),
                        lengths.rows(0, n), n, longest};
    tok.rows(0, R).copy_from(toks);
    packing.seq.copy_from(seq);
    packing.pos.copy_from(at);
    packing.starts.copy_from(first);
    packing.lengths.copy_from(len);
    lastRows.rows(0, n).copy_from(last);

    ctx.reset_launches();
    Tensor<D> xr = x.rows(0, R);                // [R, C]
    nn::Workspace<D> w = ws.rows(R);
    (*embedding)(ctx, tok.rows(0, R), packing.pos, xr);
    for (const nn::TransformerBlock<D> &layer : layers)
      layer.prefill(ctx, xr, packing, w);
    if (allLogits) {
      (*lmHead)(ctx, xr, w.normed, logitsBuf.rows(0, R));
    } else {
      Tensor<D> lastX = w.att.rows(0, n);       // [n, C] each prompt's last row
      (*gather)(ctx, xr, lastRows.rows(0, n), lastX);
      (*lmHead)(ctx, lastX, w.normed.rows(0, n), logitsBuf.rows(0, n));
    }
    info.launches_per_prefill = ctx.launches();
  }

  std::vector<float> logits(const std::vector<int32_t> &tokens) override {
    checkPrompt(tokens);
    prefill({tokens}, true);
    std::vector<H> raw = logitsBuf.rows(0, int64_t(tokens.size())).to_host();
    if (gpu)
      cuda::synchronize();
    return std::vector<float>(raw.begin(), raw.end());
  }

  static nn::SampleOptions sampling(const GenerateOptions &o) {
    return {o.temperature, o.top_k, o.top_p, o.seed};
  }

  /// One decode step for all `B` sequences: embed next[b] at pos[b], run the
  /// blocks, sample into next[b] and advance pos[b]. Device-side only, so
  /// that it can be captured once as a CUDA graph (one per attention length
  /// bucket: `keys` bounds pos[b] + 1 and picks the attention kernels; any
  /// value is correct, 0 meaning the whole context).
  void decodeStep(int B, const GenerateOptions &o, int64_t keys) {
    ctx.reset_launches();
    Tensor<D> xb = x.rows(0, B);                // [B, C]
    Tensor<i32> nextB = next.rows(0, B), posB = pos.rows(0, B);
    nn::Workspace<D> w = ws.rows(B);
    (*embedding)(ctx, nextB, posB, xb);
    for (const nn::TransformerBlock<D> &layer : layers)
      layer.decode(ctx, xb, posB, w, keys);
    Tensor<D> logitsB = logitsBuf.rows(0, B);   // [B, V]
    (*lmHead)(ctx, xb, w.normed, logitsB);
    (*sampler)(ctx, logitsB, nextB, posB, 1, sampling(o));
    info.launches_per_decode_step = ctx.launches();
  }

  std::vector<std::vector<int32_t>> generate(const std::vector<std::vector<int32_t>> &prompts,
                                             const GenerateOptions &o,
                                             const std::function<void(int, int32_t)> &cb) override {
    int B = int(prompts.size());
    if (B < 1 || B > std::max(1, opts.max_batch))
      throw Error("gpt2: " + std::to_string(B) + " prompts; this model was set up for at most " +
                  std::to_string(std::max(1, opts.max_batch)));
    if (!(o.temperature >= 0) || std::isinf(o.temperature))
      throw Error("gpt2: temperature must be a finite number >= 0, got " +
                  std::to_string(o.temperature));
    if (o.top_k < 0)
      throw Error("gpt2: top_k must be >= 0 (0: no limit), got " + std::to_string(o.top_k));
    if (!(o.top_p > 0 && o.top_p <= 1))
      throw Error("gpt2: top_p must be in (0, 1], got " + std::to_string(o.top_p));
    int longest = 0;
    for (auto &p : prompts) {
      checkPrompt(p);
      longest = std::max(longest, int(p.size()));
    }
    int steps = std::min(o.max_new_tokens, Tmax - longest);
    std::vector<std::vector<int32_t>> out(static_cast<std::size_t>(B));
    std::vector<bool> done(static_cast<std::size_t>(B), steps <= 0);
    // One packed prefill of every prompt, then each one's first new token.
    configureDecode(B);
    prefill(prompts, false);
    std::vector<int32_t> lens;
    for (auto &p : prompts)
      lens.push_back(int32_t(p.size()));
    Tensor<i32> nextB = next.rows(0, B), posB = pos.rows(0, B);
    posB.copy_from(lens);
    (*sampler)(ctx, logitsBuf.rows(0, B), nextB, posB, 0, sampling(o));
    auto collect = [&] {
      std::vector<int32_t> current = nextB.to_host();
      for (int b = 0; b < B; ++b) {
        if (done[std::size_t(b)])
          continue;
        out[std::size_t(b)].push_back(current[std::size_t(b)]);
        if (cb)
          cb(b, current[std::size_t(b)]);
        if ((o.stop_at_eot && current[std::size_t(b)] == o.eot) ||
            int(out[std::size_t(b)].size()) >= steps)
          done[std::size_t(b)] = true;
      }
      return std::all_of(done.begin(), done.end(), [](bool d) { return d; });
    };
    if (steps <= 0 || collect())
      return out;
    bool useGraph = gpu && opts.cuda_graphs;
    if (useGraph && !stream)
      stream = std::make_unique<cuda::Stream>();
    // The graph bakes in the batch and the sampling parameters.
    // Exact values: std::to_string would print 1e-7 and 1e-40 both as 0.000000.
    auto exact = [](float v) { return std::to_string(std::bit_cast<uint32_t>(v)); };
    std::string key = std::to_string(B) + "/" + exact(o.temperature) + "/" +
                      std::to_string(o.top_k) + "/" + exact(o.top_p) + "/" +
                      std::to_string(o.seed);
    if (useGraph && graphKey != key) {
      graphs.clear();
      graphKey = key;
    }
    // Step s embeds the token at position lens[b] + s: at most longest + s + 1
    // keys. Each attention length bucket with a tuned decode attention has
    // its own graph, captured when a step first reaches it; the buckets
    // without (which all run the heuristic kernel) share one.
    const nn::CausalSelfAttention<D> &attention = layers.front().attention();
    auto graphFor = [&](int64_t keys) -> int64_t {
      bool tuned = std::any_of(layers.begin(), layers.end(),
                               [&](const auto &l) { return l.attention().decode_tuned(B, keys) != nullptr; });
      return tuned ? attention.decode_bucket(keys) : 0;
    };
    for (int64_t s = 0;; ++s) {
      int64_t keys = longest + s + 1;
      if (useGraph) {
        int64_t bucket = graphFor(keys);
        auto g = graphs.find(bucket);
        if (g == graphs.end()) {
          g = graphs.emplace(bucket, cuda::Graph::capture(*stream, [&] { decodeStep(B, o, keys); })).first;
          info.decode_graph = true;
          ++info.graph_captures;
        }
        g->second.replay(*stream);
        stream->synchronize();
        ++info.graph_replays;
      } else {
        decodeStep(B, o, keys);
      }
      if (collect())
        break;
    }
    return out;
  }

  StepProfile profile_decode(const std::vector<std::vector<int32_t>> &prompts,
                             int steps) override {
    if (!gpu)
      throw Error("gpt2: profile_decode needs the CUDA target");
    int B = int(prompts.size()), longest = 0;
    for (auto &p : prompts)
      longest = std::max(longest, int(p.size()));
    if (steps < 1 || longest + 2 * steps + 8 > Tmax)
      throw Error("gpt2: profile_decode: the prompts plus " + std::to_string(2 * steps + 8) +
                  " positions do not fit the context of " + std::to_string(Tmax));
    GenerateOptions o;
    o.max_new_tokens = 1;
    o.stop_at_eot = false;
    generate(prompts, o, {}); // prefill; pos[] and next[] are set
    if (!stream)
      stream = std::make_unique<cuda::Stream>();
    StepProfile prof;
    std::map<std::string, std::pair<int, double>> byRole;
    {
      cuda::StreamScope scope(*stream);
      cuda::Timeline tl;
      std::vector<std::string> roles;
      for (int s = 0; s < steps; ++s) {
        roles.clear();
        ctx.on_launch = [&](const std::string &role) {
          tl.mark();
          roles.push_back(role);
        };
        tl.mark();
        decodeStep(B, o, longest + s + 1);
        ctx.on_launch = nullptr;
        std::vector<double> ms = tl.elapsed_ms();
        for (std::size_t i = 0; i < ms.size(); ++i) {
          auto &[n, us] = byRole[roles[i]];
          n += s == 0;
          us += ms[i] * 1e3 / steps;
          prof.kernels_us += ms[i] * 1e3 / steps;
        }
      }
      prof.launches = int(roles.size());
    }
    for (auto &[role, v] : byRole)
      prof.kernels.push_back({role, v.first, v.second});
    std::sort(prof.kernels.begin(), prof.kernels.end(),
              [](auto &a, auto &b) { return a.us > b.us; });
    if (opts.cuda_graphs) {
      graphs.clear();
      graphKey.clear();
      // Captured for the bucket of the first step it replays (later
      // replays go further: the same kernels, whichever bucket they reach).
      auto timeGraph = [&] {
        cuda::Graph g = cuda::Graph::capture(*stream, [&] { decodeStep(B, o, longest + steps + 1); });
        cuda::StreamScope scope(*stream);
        return cuda::time_ms([&] { g.replay(*stream); }, steps, 3) * 1e3;
      };
      prof.graph_us = timeGraph();
      // Each role's share: the step without its launches (wrong results,
      // the same work for everything else).
      for (auto &k : prof.kernels) {
        ctx.elide = {k.role};
        try {
          k.graph_us = prof.graph_us - timeGraph();
        } catch (...) {
          ctx.elide.clear();
          throw;
        }
        ctx.elide.clear();
      }
    }
    return prof;
  }

  ModelImpl(const ModelImpl &) = delete;
};


template <class D>
std::unique_ptr<Model::Impl> make_model(const Weights &w, const Target &t, Precision p, ModelOptions o) {
  return std::make_unique<ModelImpl<D>>(w, t, p, o);
}

} // namespace kiln::gpt2::impl
