//===- Model.cpp - a GPT-2 decoder made of kiln kernels --------------------===//
#include "kiln/gpt2/model.hpp"

#include "Memory.h"
#include "Parallel.h"

#include "kiln/kiln.hpp"
#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/runtime/cuda.hpp"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace kiln::gpt2 {

Precision parse_precision(const std::string &name) {
  if (name == "fp32" || name == "f32")
    return Precision::F32;
  if (name == "fp16" || name == "f16")
    return Precision::F16;
  if (name == "bf16")
    return Precision::BF16;
  throw Error("gpt2: unknown precision '" + name + "' (fp32, fp16 or bf16)");
}

std::string to_string(Precision p) {
  return p == Precision::F32 ? "fp32" : p == Precision::F16 ? "fp16" : "bf16";
}

namespace {

/// An array on the target: device memory on a GPU, host memory on the CPU.
template <class H> class Buffer {
public:
  Buffer() = default;
  Buffer(bool gpu, std::size_t n) : n_(n) {
    if (gpu)
      dev_ = std::make_unique<cuda::DeviceBuffer<H>>(std::max<std::size_t>(n, 1));
    else
      host_.assign(n, H{});
  }
  H *data() const { return dev_ ? dev_->data() : const_cast<H *>(host_.data()); }
  std::size_t size() const { return n_; }
  void upload(const H *src, std::size_t n, std::size_t at = 0) {
    if (dev_)
      cuda::copy_to_device(dev_->data() + at, src, n * sizeof(H));
    else
      std::memcpy(host_.data() + at, src, n * sizeof(H));
  }
  void download(H *dst, std::size_t n, std::size_t at = 0) const {
    if (dev_)
      cuda::copy_to_host(dst, dev_->data() + at, n * sizeof(H));
    else
      std::memcpy(dst, host_.data() + at, n * sizeof(H));
  }

private:
  std::size_t n_ = 0;
  std::vector<H> host_;
  std::unique_ptr<cuda::DeviceBuffer<H>> dev_;
};

/// Type-erased launch arguments from host values.
inline KernelArg arg(const void *p) { return KernelArg::untyped_pointer(p); }
inline KernelArg arg(int v) { return KernelArg::integer(v); }
inline KernelArg arg(float v) { return KernelArg::floating(v); }

template <class D> struct HostOf;
template <> struct HostOf<f32> { using type = float; };
template <> struct HostOf<f16> { using type = half; };
template <> struct HostOf<bf16> { using type = bfloat16; };

} // namespace

struct Model::Impl {
  Config cfg;
  Target target;
  Precision precision;
  ModelOptions opts;
  Explain info;
  bool gpu;
  int Tmax;
  virtual ~Impl() = default;
  Impl(const Config &c, const Target &t, Precision p, ModelOptions o)
      : cfg(c), target(t), precision(p), opts(o), gpu(t.kind == Target::Kind::Cuda),
        Tmax(o.max_seq > 0 ? std::min(o.max_seq, c.n_ctx) : c.n_ctx) {}
  virtual std::vector<float> logits(const std::vector<int32_t> &tokens) = 0;
  virtual std::vector<std::vector<int32_t>>
  generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &o,
           const std::function<void(int, int32_t)> &cb) = 0;
  virtual StepProfile profile_decode(const std::vector<std::vector<int32_t>> &prompts,
                                     int steps) = 0;
};

namespace {

template <class D> struct ModelImpl final : Model::Impl {
  using H = typename HostOf<D>::type;

  // Parameters in the compute dtype; wteT is the tied head as [C, V].
  struct Layer {
    Buffer<H> ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, mlpW, mlpB;
    Buffer<H> kc, vc;
    /// The weights again as [N, K], for the decode-step kernels.
    Buffer<H> attnWt, projWt, fcWt, mlpWt;
  };
  Buffer<H> wte, wteT, wpe, lnfw, lnfb;
  std::vector<Layer> layers;
  // Activations, sized for a whole context of rows.
  Buffer<H> x, h, qkv, att, fc, logitsBuf;
  Buffer<int32_t> tok, iota, next, pos;
  Buffer<int32_t> rowSeq, rowPos, starts, lengths, lastRows; ///< a packed prefill
  Buffer<float> attParts; ///< decode attention per cache chunk, [B, H, splits, head_dim + 2]
  Buffer<int32_t> attCount; ///< finished chunks per (sequence, head); 0 between launches
  static constexpr int kChunk = 32, kMaxSplits = 32;
  /// Fewer 64x64 tiles than this (two per multiprocessor of an H100/H200)
  /// and a prefill product uses the small-tile kernels.
  static constexpr int64_t kFewTiles = 264;

  std::map<std::string, CompiledKernel> kernels;
  std::optional<cuda::Graph> graph;
  std::unique_ptr<cuda::Stream> stream;
  int launchCount = 0;

  /// Kernels to compile, gathered by compileKernels() and compiled in parallel.
  std::vector<std::function<void()>> pending;
  std::mutex compiled;

  /// Output tile (rows, columns) of each product's program (prefill and
  /// decode), for its grid.
  std::map<std::string, std::pair<int, int>> tiles;

  template <class K> void add(const std::string &role, CompileOptions options = {}) {
    if constexpr (requires { K::BM + K::BN; })
      tiles[role] = {K::BM, K::BN};
    pending.push_back([this, role, options] {
      auto k = compile<K>(target, options);
      std::lock_guard<std::mutex> lock(compiled);
      info.kernels.push_back({k.name(), role, k.compile_seconds(), k.from_cache(),
                              options.num_warps, options.num_stages});
      info.compile_seconds += k.compile_seconds();
      kernels.emplace(role, std::move(static_cast<CompiledKernel &>(k)));
    });
  }

  void launch(const std::string &role, Grid grid, std::initializer_list<KernelArg> args) {
    launch(role, grid, std::span<const KernelArg>(args.begin(), args.size()));
  }
  void launch(const std::string &role, Grid grid, std::span<const KernelArg> args) {
    kernels.at(role).launch(grid, args);
    ++launchCount;
    if (timeline) {
      timeline->mark();
      timedRoles.push_back(role);
    }
  }
  /// While set (profile_decode), every launch is followed by an event.
  cuda::Timeline *timeline = nullptr;
  std::vector<std::string> timedRoles;

  /// `t` in the compute type; as [N, K] when `transposed` (t is [K, N]),
  /// in 32 x 32 tiles so that both sides are read and written a cache line
  /// at a time.
  static std::vector<H> hostCopy(const Tensor &t, bool transposed = false) {
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

  Buffer<H> upload(const std::vector<H> &host) {
    Buffer<H> b(gpu, host.size());
    b.upload(host.data(), host.size());
    return b;
  }

  /// A layer's parameters in the compute type, in the order of Layer's
  /// members, then the [N, K] copies of its four matrices.
  static std::vector<std::vector<H>> hostLayer(const LayerWeights &lw, bool decodeCopies) {
    std::vector<std::vector<H>> out;
    for (const Tensor *t : {&lw.ln_1_w, &lw.ln_1_b, &lw.c_attn_w, &lw.c_attn_b, &lw.c_proj_w,
                            &lw.c_proj_b, &lw.ln_2_w, &lw.ln_2_b, &lw.c_fc_w, &lw.c_fc_b,
                            &lw.mlp_proj_w, &lw.mlp_proj_b})
      out.push_back(hostCopy(*t));
    if (decodeCopies)
      for (const Tensor *t : {&lw.c_attn_w, &lw.c_proj_w, &lw.c_fc_w, &lw.mlp_proj_w})
        out.push_back(hostCopy(*t, /*transposed=*/true));
    return out;
  }

  ModelImpl(const Weights &w, const Target &t, Precision p, ModelOptions o)
      : Impl(w.config, t, p, o) {
    cfg.validate();
    auto started = std::chrono::steady_clock::now();
    int C = cfg.n_embd, V = cfg.vocab_size, B = std::max(1, o.max_batch);
    requireMemory(B, decodeWidth(C));
    // Host-side conversion (and transposition) of a few layers ahead runs
    // in parallel with the uploads of the current one.
    constexpr std::size_t kAhead = 4;
    bool decodeCopies = decodeWidth(C);
    std::vector<std::future<std::vector<std::vector<H>>>> ahead;
    auto schedule = [&](std::size_t i) {
      if (i < w.layers.size())
        ahead.push_back(std::async(std::launch::async, [&w, i, decodeCopies] {
          return hostLayer(w.layers[i], decodeCopies);
        }));
    };
    for (std::size_t i = 0; i < kAhead; ++i)
      schedule(i);
    wte = upload(hostCopy(w.wte));
    wteT = upload(hostCopy(w.wte, /*transposed=*/true)); // [C, V]
    wpe = upload(hostCopy(w.wpe));
    lnfw = upload(hostCopy(w.ln_f_w));
    lnfb = upload(hostCopy(w.ln_f_b));
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
      schedule(i + kAhead);
      std::vector<std::vector<H>> hl = ahead[i].get();
      Layer l{upload(hl[0]),
              upload(hl[1]),
              upload(hl[2]),
              upload(hl[3]),
              upload(hl[4]),
              upload(hl[5]),
              upload(hl[6]),
              upload(hl[7]),
              upload(hl[8]),
              upload(hl[9]),
              upload(hl[10]),
              upload(hl[11]),
              Buffer<H>(gpu, std::size_t(B) * Tmax * C),
              Buffer<H>(gpu, std::size_t(B) * Tmax * C)};
      if (decodeCopies) {
        l.attnWt = upload(hl[12]);
        l.projWt = upload(hl[13]);
        l.fcWt = upload(hl[14]);
        l.mlpWt = upload(hl[15]);
      }
      layers.push_back(std::move(l));
    }
    // A packed prefill holds up to B prompts of up to Tmax tokens.
    std::size_t rows = std::size_t(B) * std::size_t(Tmax);
    x = Buffer<H>(gpu, rows * C);
    h = Buffer<H>(gpu, rows * C);
    qkv = Buffer<H>(gpu, rows * 3 * C);
    att = Buffer<H>(gpu, rows * C);
    fc = Buffer<H>(gpu, rows * 4 * C);
    logitsBuf = Buffer<H>(gpu, std::size_t(std::max(Tmax, B)) * V);
    tok = Buffer<int32_t>(gpu, rows);
    rowSeq = Buffer<int32_t>(gpu, rows);
    rowPos = Buffer<int32_t>(gpu, rows);
    starts = Buffer<int32_t>(gpu, std::size_t(B));
    lengths = Buffer<int32_t>(gpu, std::size_t(B));
    lastRows = Buffer<int32_t>(gpu, std::size_t(B));
    iota = Buffer<int32_t>(gpu, rows);
    std::vector<int32_t> seq(rows);
    for (std::size_t i = 0; i < rows; ++i)
      seq[i] = int32_t(i);
    iota.upload(seq.data(), rows);
    attParts =
        Buffer<float>(gpu, std::size_t(B) * cfg.n_head * std::size_t(ceil_div(Tmax, kChunk)) *
                               std::size_t(cfg.head_dim() + 2));
    attCount = Buffer<int32_t>(gpu, std::size_t(B) * std::size_t(cfg.n_head));
    std::vector<int32_t> zero(attCount.size(), 0);
    attCount.upload(zero.data(), zero.size());
    next = Buffer<int32_t>(gpu, std::size_t(B));
    pos = Buffer<int32_t>(gpu, std::size_t(B));
    auto prepared = std::chrono::steady_clock::now();
    info.prepare_seconds = std::chrono::duration<double>(prepared - started).count();
    compileKernels();
    info.kernels_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared).count();
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
    elems = addSat(elems, mulSat(10 * C, rows));                          // x h qkv att fc
    elems = addSat(elems, mulSat(V, std::max<uint64_t>(uint64_t(Tmax), uint64_t(B)))); // logits
    uint64_t bytes = addSat(mulSat(elems, e), mulSat(rows, 16));          // and the row indices
    std::string what = "a model of " + cfg.describe() + " for " + std::to_string(B) +
                       " sequence(s) of " + std::to_string(Tmax) + " tokens";
    if (gpu)
      requireDeviceMemory(bytes, what);
    else
      requireHostMemory(bytes, what);
  }

  /// Embedding widths with decode-step kernels (their K is a compile-time
  /// constant): GPT-2's, and 64 for small test models. Other widths decode
  /// with the prefill kernels.
  using DecodeWidths = std::integer_sequence<int, 64, 768, 1024, 1280, 1600>;
  template <int... E> static bool decodeWidthIn(int C, std::integer_sequence<int, E...>) {
    return ((C == E) || ...);
  }
  static bool decodeWidth(int C) { return decodeWidthIn(C, DecodeWidths{}); }
  static constexpr int kDecodeRows = 8; ///< decode kernels for 1 row and for up to 8
  bool fastDecode(int rows) const { return rows <= kDecodeRows && decodeWidth(cfg.n_embd); }
  /// Launches decode kernel `role` over N output columns: its one-row
  /// variant for one row, its kDecodeRows variant otherwise.
  void decodeLaunch(const std::string &role, int rows, int N,
                    std::initializer_list<KernelArg> args) {
    std::string name = role + std::to_string(rows == 1 ? 1 : kDecodeRows);
    launch(name, Grid(ceil_div(N, tiles.at(name).second)), args);
  }

  template <int... E> void addDecodeKernelsFor(int C, std::integer_sequence<int, E...>) {
    ((C == E ? addDecodeKernels<E>() : void()), ...);
  }
  template <int E> void addDecodeKernels() {
    using ops::DecodeLinear;
    using enum ops::DecodeEpilogue;
    constexpr int KC = 256;
    // Output columns per program: BN of the QKV product, BF of the fc, BP
    // of the K = 4 n_embd projection (the head: see head()).
    auto rows = [&]<int BM, int BN, int BF, int BP>() {
      std::string s = std::to_string(BM);
      add<ops::DecodeQkv<D, BM, BN, E, KC>>("decode_qkv" + s);
      add<DecodeLinear<D, BM, 4, E, KC, false, BiasResidual>>("decode_proj" + s);
      add<DecodeLinear<D, BM, BF, E, KC, true, BiasGelu>>("decode_fc" + s);
      add<DecodeLinear<D, BM, BP, 4 * E, KC, false, BiasResidual>>("decode_mlp" + s);
    };
    rows.template operator()<1, 8, 8, 4>();
    rows.template operator()<kDecodeRows, 4, 4, 4>();
    add<DecodeLinear<D, 1, 8, E, KC, false, None>>("decode_head1");
  }

  void compileKernels() {
    int C = cfg.n_embd, hd = cfg.head_dim();
    addDecodeKernelsFor(C, DecodeWidths{});
    if (C > 2048)
      throw Error("gpt2: n_embd " + std::to_string(C) +
                  " is wider than the layernorm kernel (2048)");
    if (C <= 1024)
      add<ops::LayerNorm<D, 1024, true>>("layernorm");
    else
      add<ops::LayerNorm<D, 2048, true>>("layernorm");
    add<ops::Embedding<D, 256>>("embedding");
    add<ops::KvWrite<D, 256>>("kv_write");
    add<ops::GatherRows<D, 256>>("gather");
    {
      // A vocabulary row in 7 sweeps rather than 50: each sweep waits on
      // its loads.
      CompileOptions wide;
      wide.num_warps = 8;
      add<ops::ArgmaxRows<D, 8192>>("argmax", wide);
    }
    add<ops::SampleRows<D, 1024>>("sample");
    if (gpu) {
      // Prefill products, as the autotuner ranked them on an H200 for 2016
      // and 256 packed rows (kiln_bench's BM_prefill, bench/README.md). With
      // TMA (sm_90a), 64x128 tiles on one warpgroup with 3 stages lead for
      // 16-bit types; f32 (no tensor cores here) keeps 128x128 tiles with 8
      // warps and 2 stages (three f32 stages and the epilogue exceed shared
      // memory); 32x64 tiles with 3 stages when larger tiles would be few.
      CompileOptions big, small;
      small.num_stages = 3;
      if constexpr (std::is_same_v<D, f32>) {
        big.num_warps = 8;
        big.num_stages = 2;
        add<ops::MatmulBias<D, 128, 128, 64>>("qkv", big);
        add<ops::MatmulBiasResidual<D, 128, 128, 64>>("proj_residual", big);
        add<ops::MatmulBiasGelu<D, 128, 128, 64>>("fc_gelu", big);
      } else {
        big.num_warps = 4;
        big.num_stages = 3;
        add<ops::MatmulBias<D, 64, 128, 64>>("qkv", big);
        add<ops::MatmulBiasResidual<D, 64, 128, 64>>("proj_residual", big);
        add<ops::MatmulBiasGelu<D, 64, 128, 64>>("fc_gelu", big);
      }
      add<ops::Matmul<D, 64, 64, 32>>("lm_head");
      add<ops::Matmul<D, 16, 64, 64>>("lm_head_decode");
      add<ops::MatmulBias<D, 32, 64, 64>>("qkv_small", small);
      add<ops::MatmulBiasResidual<D, 32, 64, 64>>("proj_residual_small", small);
      add<ops::MatmulBiasGelu<D, 32, 64, 64>>("fc_gelu_small", small);
    } else {
      add<ops::MatmulBias<D, 32, 32, 16>>("qkv");
      add<ops::MatmulBiasResidual<D, 32, 32, 16>>("proj_residual");
      add<ops::MatmulBiasGelu<D, 32, 32, 16>>("fc_gelu");
      add<ops::Matmul<D, 32, 32, 16>>("lm_head");
      add<ops::Matmul<D, 16, 32, 32>>("lm_head_decode");
    }
    if (ceil_div(Tmax, kChunk) > kMaxSplits)
      throw Error("gpt2: a KV cache of " + std::to_string(Tmax) +
                  " positions is longer than decode attention's " +
                  std::to_string(kChunk * kMaxSplits) + " (use --max-seq)");
    auto withHead = [&]<int HD>() {
      add<ops::AttentionPrefill<D, 64, 64, HD>>("attention_prefill");
      add<ops::AttentionDecode<D, kChunk, HD, kChunk, kMaxSplits>>("attention_decode");
    };
    switch (hd) {
    case 16:
      withHead.template operator()<16>();
      break;
    case 32:
      withHead.template operator()<32>();
      break;
    case 64:
      withHead.template operator()<64>();
      break;
    default:
      withHead.template operator()<128>();
      break;
    }
    // Independent compilations, one per core (cache hits take about 1 ms each).
    std::vector<std::exception_ptr> errors(pending.size());
    parallelFor(
        int64_t(pending.size()),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            try {
              pending[std::size_t(i)]();
            } catch (...) {
              errors[std::size_t(i)] = std::current_exception();
            }
          }
        },
        1);
    pending.clear();
    for (auto &e : errors)
      if (e)
        std::rethrow_exception(e);
    std::sort(
        info.kernels.begin(), info.kernels.end(),
        [](const Explain::KernelInfo &a, const Explain::KernelInfo &b) { return a.role < b.role; });
  }

  /// `c = a @ b` with the epilogue of `role` (qkv: + bias; fc_gelu: + bias,
  /// gelu; proj_residual: + bias + res; lm_head: nothing).
  void matmul(const std::string &role, int M, int N, int K, const H *a, const H *b, const H *bias,
              const H *res, H *c) {
    bool few = M <= 16; // a decode step without decode kernels: 16-row tiles
    std::string name = few && role == "lm_head" ? "lm_head_decode" : role;
    if (gpu && role != "lm_head" && ceil_div(M, 64) * ceil_div(N, 64) < kFewTiles)
      name = role + "_small";
    auto [bm, bn] = tiles.at(name);
    std::vector<KernelArg> args{arg(a), arg(b)};
    if (bias)
      args.push_back(arg(bias));
    if (res)
      args.push_back(arg(res));
    args.push_back(arg(c));
    for (int v : {M, N, K, K, N, N})
      args.push_back(arg(v));
    launch(name, Grid(ceil_div(M, bm), ceil_div(N, bn)), args);
  }

  /// `c = layernorm(x) @ b` + the epilogue of `role` (qkv or fc_gelu).
  void normedMatmul(const std::string &role, int M, int N, const Buffer<H> &lnw,
                    const Buffer<H> &lnb, const H *b, const H *bias, H *c) {
    layernorm(x, lnw, lnb, h, M);
    matmul(role, M, N, cfg.n_embd, h.data(), b, bias, nullptr, c);
  }

  void layernorm(const Buffer<H> &in, const Buffer<H> &w, const Buffer<H> &b, Buffer<H> &out,
                 int rows, std::size_t rowOffset = 0) {
    int C = cfg.n_embd;
    launch("layernorm", Grid(rows),
           {arg(in.data() + rowOffset * C), arg(w.data()), arg(b.data()),
            arg(out.data() + rowOffset * C), arg(C), arg(C), arg(1e-5f)});
  }

  /// The transformer blocks over `rows` rows held in x: a packed prefill of
  /// `seqs` prompts (rowSeq/rowPos/starts/lengths describe them, the longest
  /// has `longest` tokens) or a decode step (row r = sequence r at pos[r]).
  void blocks(int rows, bool prefill, int seqs = 0, int longest = 0) {
    int C = cfg.n_embd, H = cfg.n_head;
    float scale = 1.0f / std::sqrt(float(cfg.head_dim()));
    if (!prefill && fastDecode(rows))
      return decodeBlocks(rows);
    for (Layer &l : layers) {
      normedMatmul("qkv", rows, 3 * C, l.ln1w, l.ln1b, l.attnW.data(), l.attnB.data(), qkv.data());
      if (prefill) {
        launch("kv_write", Grid(rows),
               {arg(qkv.data()), arg(rowSeq.data()), arg(rowPos.data()), arg(l.kc.data()),
                arg(l.vc.data()), arg(C), arg(Tmax)});
        launch("attention_prefill", Grid(ceil_div(longest, 64), H, seqs),
               {arg(qkv.data()), arg(l.kc.data()), arg(l.vc.data()), arg(att.data()),
                arg(starts.data()), arg(lengths.data()), arg(C), arg(Tmax), arg(scale)});
      } else {
        launch("kv_write", Grid(rows),
                 {arg(qkv.data()), arg(iota.data()), arg(pos.data()), arg(l.kc.data()),
                  arg(l.vc.data()), arg(C), arg(Tmax)});
        decodeAttention(l, rows);
      }
      matmul("proj_residual", rows, C, C, att.data(), l.projW.data(), l.projB.data(), x.data(),
             x.data());
      normedMatmul("fc_gelu", rows, 4 * C, l.ln2w, l.ln2b, l.fcW.data(), l.fcB.data(), fc.data());
      matmul("proj_residual", rows, C, 4 * C, fc.data(), l.mlpW.data(), l.mlpB.data(), x.data(),
             x.data());
    }
  }

  /// Decode attention over the whole cache: a fixed grid of (sequence,
  /// head, chunk) programs, so the same graph serves every position.
  void decodeAttention(Layer &l, int rows) {
    int C = cfg.n_embd, splits = int(ceil_div(Tmax, kChunk));
    float scale = 1.0f / std::sqrt(float(cfg.head_dim()));
    launch("attention_decode", Grid(rows, cfg.n_head, splits),
           {arg(qkv.data()), arg(l.kc.data()), arg(l.vc.data()), arg(attParts.data()),
            arg(attCount.data()), arg(att.data()), arg(pos.data()), arg(C), arg(Tmax), arg(scale)});
  }

  /// A decode step's blocks with the decode kernels: five launches per
  /// layer (layernorm + QKV + cache write; attention; projection +
  /// residual; layernorm + fc + gelu; projection + residual).
  void decodeBlocks(int rows) {
    int C = cfg.n_embd;
    const float eps = 1e-5f;
    for (Layer &l : layers) {
      decodeLaunch("decode_qkv", rows, 3 * C,
                   {arg(x.data()), arg(l.ln1w.data()), arg(l.ln1b.data()), arg(l.attnWt.data()),
                    arg(l.attnB.data()), arg(qkv.data()), arg(pos.data()), arg(l.kc.data()),
                    arg(l.vc.data()), arg(rows), arg(3 * C), arg(Tmax), arg(eps)});
      decodeAttention(l, rows);
      decodeLaunch("decode_proj", rows, C,
                   {arg(att.data()), arg(att.data()), arg(att.data()), arg(l.projWt.data()),
                    arg(l.projB.data()), arg(x.data()), arg(x.data()), arg(rows), arg(C),
                    arg(eps)});
      decodeLaunch("decode_fc", rows, 4 * C,
                   {arg(x.data()), arg(l.ln2w.data()), arg(l.ln2b.data()), arg(l.fcWt.data()),
                    arg(l.fcB.data()), arg(fc.data()), arg(fc.data()), arg(rows), arg(4 * C),
                    arg(eps)});
      decodeLaunch("decode_mlp", rows, C,
                   {arg(fc.data()), arg(fc.data()), arg(fc.data()), arg(l.mlpWt.data()),
                    arg(l.mlpB.data()), arg(x.data()), arg(x.data()), arg(rows), arg(C), arg(eps)});
    }
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
  /// logits of each prompt's last row in logitsBuf rows 0 .. B-1, or of every
  /// row of a single prompt when `allLogits`.
  void prefill(const std::vector<std::vector<int32_t>> &prompts, bool allLogits) {
    int C = cfg.n_embd, V = cfg.vocab_size, n = int(prompts.size()), longest = 0;
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
    int R = int(toks.size());
    launchCount = 0;
    tok.upload(toks.data(), toks.size());
    rowSeq.upload(seq.data(), seq.size());
    rowPos.upload(at.data(), at.size());
    starts.upload(first.data(), first.size());
    lengths.upload(len.data(), len.size());
    lastRows.upload(last.data(), last.size());
    launch("embedding", Grid(R),
           {arg(tok.data()), arg(rowPos.data()), arg(wte.data()), arg(wpe.data()), arg(x.data()),
            arg(C)});
    blocks(R, /*prefill=*/true, n, longest);
    if (allLogits) {
      layernorm(x, lnfw, lnfb, h, R);
      matmul("lm_head", R, V, C, h.data(), wteT.data(), nullptr, nullptr, logitsBuf.data());
    } else {
      launch("gather", Grid(n), {arg(x.data()), arg(lastRows.data()), arg(att.data()), arg(C)});
      layernorm(att, lnfw, lnfb, h, n);
      head(n);
    }
    info.launches_per_prefill = launchCount;
  }

  std::vector<float> logits(const std::vector<int32_t> &tokens) override {
    checkPrompt(tokens);
    prefill({tokens}, true);
    std::size_t n = tokens.size() * std::size_t(cfg.vocab_size);
    std::vector<H> raw(n);
    logitsBuf.download(raw.data(), n);
    if (gpu)
      cuda::synchronize();
    return std::vector<float>(raw.begin(), raw.end());
  }

  /// Picks the next token of `rows` rows of logits into next[], advancing pos[].
  void choose(const H *logits, int32_t *nextOut, int32_t *posOut, int rows, int advance,
              const GenerateOptions &o) {
    int V = cfg.vocab_size;
    if (!(o.temperature > 0))
      launch("argmax", Grid(rows),
             {arg(logits), arg(nextOut), arg(posOut), arg(V), arg(V), arg(advance)});
    else
      launch("sample", Grid(rows),
             {arg(logits), arg(nextOut), arg(posOut), arg(V), arg(V), arg(advance),
              arg(o.temperature), arg(o.top_k), arg(o.top_p), arg(int(o.seed))});
  }

  /// The logits of `rows` normalised rows in h (a decode step's, or a
  /// prefill's last rows). One row: the tied head streams wte itself ([V, C]);
  /// Nsight Compute on an H200 had it at 22 us against 72 us for the 16-row
  /// product, which wins at 8 rows (71 us against 95).
  void head(int rows) {
    int C = cfg.n_embd, V = cfg.vocab_size;
    if (rows == 1 && fastDecode(rows))
      decodeLaunch("decode_head", rows, V,
                   {arg(h.data()), arg(h.data()), arg(h.data()), arg(wte.data()), arg(wte.data()),
                    arg(logitsBuf.data()), arg(logitsBuf.data()), arg(rows), arg(V), arg(1e-5f)});
    else
      matmul("lm_head", rows, V, C, h.data(), wteT.data(), nullptr, nullptr, logitsBuf.data());
  }

  /// One decode step for all `B` sequences: embed next[b] at pos[b], run the
  /// blocks, sample into next[b] and advance pos[b]. Device-side only.
  void decodeStep(int B, const GenerateOptions &o) {
    int C = cfg.n_embd;
    launchCount = 0;
    launch("embedding", Grid(B),
           {arg(next.data()), arg(pos.data()), arg(wte.data()), arg(wpe.data()), arg(x.data()),
            arg(C)});
    blocks(B, /*prefill=*/false, 0);
    // The final layernorm once, rather than in every program of the head
    // (thousands of them, each then waiting on its own statistics).
    layernorm(x, lnfw, lnfb, h, B);
    head(B);
    choose(logitsBuf.data(), next.data(), pos.data(), B, 1, o);
    info.launches_per_decode_step = launchCount;
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
    prefill(prompts, false);
    std::vector<int32_t> lens;
    for (auto &p : prompts)
      lens.push_back(int32_t(p.size()));
    pos.upload(lens.data(), lens.size());
    choose(logitsBuf.data(), next.data(), pos.data(), B, 0, o);
    std::vector<int32_t> current(static_cast<std::size_t>(B));
    auto collect = [&] {
      next.download(current.data(), std::size_t(B));
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
    if (useGraph && (!graph || graphKey != key)) {
      graph.reset();
      graph.emplace(cuda::Graph::capture(*stream, [&] { decodeStep(B, o); }));
      graphKey = key;
      info.decode_graph = true;
    }
    while (true) {
      if (useGraph) {
        graph->replay(*stream);
        stream->synchronize();
        ++info.graph_replays;
      } else {
        decodeStep(B, o);
      }
      if (collect())
        break;
    }
    return out;
  }
  std::string graphKey;

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
      for (int s = 0; s < steps; ++s) {
        timeline = &tl;
        timedRoles.clear();
        tl.mark();
        decodeStep(B, o);
        timeline = nullptr;
        std::vector<double> ms = tl.elapsed_ms();
        for (std::size_t i = 0; i < ms.size(); ++i) {
          auto &[n, us] = byRole[timedRoles[i]];
          n += s == 0;
          us += ms[i] * 1e3 / steps;
          prof.kernels_us += ms[i] * 1e3 / steps;
        }
      }
      prof.launches = int(timedRoles.size());
    }
    for (auto &[role, v] : byRole)
      prof.kernels.push_back({role, v.first, v.second});
    std::sort(prof.kernels.begin(), prof.kernels.end(),
              [](auto &a, auto &b) { return a.us > b.us; });
    if (opts.cuda_graphs) {
      graph.reset();
      graphKey.clear();
      cuda::Graph g = cuda::Graph::capture(*stream, [&] { decodeStep(B, o); });
      cuda::StreamScope scope(*stream);
      prof.graph_us = cuda::time_ms([&] { g.replay(*stream); }, steps, 3) * 1e3;
    }
    return prof;
  }

  ModelImpl(const ModelImpl &) = delete;
};

} // namespace

Model::Model(const Weights &weights, const Target &target, Precision precision,
             ModelOptions options) {
  if (target.kind == Target::Kind::Cpu && precision != Precision::F32)
    throw Error("gpt2: the CPU backend runs fp32 only (got " + to_string(precision) + ")");
  switch (precision) {
  case Precision::F32:
    impl_ = std::make_unique<ModelImpl<f32>>(weights, target, precision, options);
    break;
  case Precision::F16:
    impl_ = std::make_unique<ModelImpl<f16>>(weights, target, precision, options);
    break;
  case Precision::BF16:
    impl_ = std::make_unique<ModelImpl<bf16>>(weights, target, precision, options);
    break;
  }
}
Model::~Model() = default;
Model::Model(Model &&) noexcept = default;

const Config &Model::config() const { return impl_->cfg; }
std::vector<float> Model::logits(const std::vector<int32_t> &tokens) {
  return impl_->logits(tokens);
}
std::vector<std::vector<int32_t>>
Model::generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                const std::function<void(int, int32_t)> &on_token) {
  return impl_->generate(prompts, options, on_token);
}
const Explain &Model::explain() const { return impl_->info; }
StepProfile Model::profile_decode(const std::vector<std::vector<int32_t>> &prompts, int steps) {
  return impl_->profile_decode(prompts, steps);
}

} // namespace kiln::gpt2
