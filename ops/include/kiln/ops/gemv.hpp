//===- gemv.hpp - linear layers of a decode step (a few rows) --------------===//
//
// A decode step multiplies one to a few activation rows by each weight
// matrix: it is bound by reading the weights once, and by latency. These
// kernels take the weight transposed ([N, K], a row per output column), so
// a program streams whole rows of it with 16-byte loads, and each program
// covers the whole of K: no split-K, no partial sums in memory, no second
// launch. K is a compile-time constant and the K loop is unrolled while
// tracing, so every weight load of a program is independent of the others
// and all of them can be in flight at once.
//
//   out[m, n] = epilogue(sum_k in(m, k) * wt[n, k]),  m < M <= BM
//
// where in(m, k) is x[m, k], or layernorm(x[m]) (weights lnw, lnb) with LN.
// Grid: (cdiv(N, BN)).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/launch.hpp"

#include <optional>
#include <vector>

namespace kiln::ops {

namespace detail {

/// Brings this program's share of `count` elements from `p` into L2: the
/// 128-byte lines of the range split evenly over the programs of a grid of
/// one or two axes, LINES lines a step. Nothing when count is 0.
template <class T, int LINES = 256> void prefetch_share(Ptr<T> p, I32 count) {
  constexpr int perLine = 128 / int(sizeof(typename T::host));
  auto lines = cdiv(count, I32(perLine));
  auto share = cdiv(lines, num_programs(0) * num_programs(1));
  auto lo = (program_id(1) * num_programs(0) + program_id(0)) * share;
  auto hi = minimum(lo + share, lines);
  auto l = arange<LINES>();
  for_range(lo, hi, LINES, [&](I32 l0) {
    auto line = l0 + l;
    prefetch(p + line * perLine, line < hi);
  });
}

/// The BM rows of (BN) f32 results of program_id(0)'s columns `rn`.
///
/// The kernels of a decode step are launched as programmatic dependents of
/// the one before them: the weights (and layernorm weights) are loaded
/// first, then the program waits for the previous kernel to complete
/// (grid_dependency_wait), calls `afterWait` (the caller's loads of what
/// earlier kernels write) and only then reads the activations. The weight
/// loads of this kernel are thus in flight while the previous one ends.
/// Between the weight loads and the wait, the grid brings the `pf_count`
/// elements from `pf` into L2 (a later kernel's weights; see prefetch_share),
/// after `beforeWait` (the caller's loads of other weights).
template <class T, int BM, int BN, int K, int KC, bool LN, class BeforeWait, class AfterWait>
std::vector<Tile<f32, BN>> decode_rows(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, I32 M,
                                          I32 N, F32 eps, Tile<i32, BN> rn, Ptr<T> pf,
                                          I32 pf_count, BeforeWait beforeWait, AfterWait afterWait) {
  static_assert(BM >= 1 && KC % 8 == 0, "decode_rows: BM >= 1 and chunks of whole 16-byte groups");
  constexpr int chunks = (K + KC - 1) / KC;
  constexpr bool ragged = K % KC != 0;
  auto ck = arange<KC>();
  // Rows past M read nothing. A row's mask is one value for the whole row
  // (except past K in a ragged last chunk), so every 16-byte group of a load
  // is either read whole or not at all.
  auto rowMask = [&]<int... S>(int m, int c, Tile<i32, S...> k) {
    Tile<i1, S...> live = broadcast_to<S...>(I32(m) < M);
    return ragged && c == chunks - 1 ? live & (k < K) : live;
  };
  auto wrow = expand_dims<1>(rn) * K;      // (BN, 1)
  auto nmask = expand_dims<1>(rn < N);     // (BN, 1)
  std::vector<Tile<f32, BN, KC>> acc(BM, zeros<f32, BN, KC>());
  auto kAt = [&](int c) { // (BN, KC): k of each element of chunk c
    return broadcast_to<BN, KC>(expand_dims<0>(c * KC + ck));
  };
  // Every weight load first, in program order, so that all of them are in
  // flight while the layernorm statistics are computed and before the first
  // product waits for one.
  std::vector<Tile<T, BN, KC>> ws;
  for (int c = 0; c < chunks; ++c) {
    auto kk = kAt(c);
    auto wmask = ragged ? nmask & (kk < K) : broadcast_to<BN, KC>(nmask);
    ws.push_back(load(wt + wrow + kk, wmask, 0));
  }
  // Every program reads the same few activations (and layernorm weights):
  // each thread loads its own elements (L1 hits after the first warp), so
  // nothing is exchanged through shared memory. With few rows they are all
  // issued here too, so that no product waits on a load issued after the
  // previous product; with many they would not fit in registers, and each
  // chunk's are loaded where they are used.
  constexpr bool preload = BM * chunks <= 16;
  auto alongK = [&](Ptr<T> p, int c) { // (BN, KC) of p[k], k in chunk c
    auto kk = kAt(c);
    return ragged && c == chunks - 1 ? load(p + kk, kk < K, 0) : load(p + kk);
  };
  auto activation = [&](int m, int c) {
    auto kk = kAt(c);
    return load(x + m * K + kk, rowMask(m, c, kk), 0);
  };
  std::vector<Tile<T, BN, KC>> as, gs, bs;
  if constexpr (preload && LN)
    for (int c = 0; c < chunks; ++c) {
      gs.push_back(alongK(lnw, c));
      bs.push_back(alongK(lnb, c));
    }
  beforeWait();
  prefetch_share(pf, pf_count);
  grid_dependency_wait();
  afterWait();
  if constexpr (preload)
    for (int c = 0; c < chunks; ++c)
      for (int m = 0; m < BM; ++m)
        as.push_back(activation(m, c));
  // The layernorm folded into the product. With d = x - x[0] (the row's
  // first element as a shift: E[d^2] - E[d]^2 does not cancel where the
  // mean is far from zero), mean = x[0] + E[d] and rstd = 1 / sqrt(E[d^2] -
  // E[d]^2 + eps), a column's
  //   sum_k w_k ((x_k - mean) rstd g_k + b_k)
  //     = rstd (sum_k (w_k g_k) d_k - E[d] sum_k w_k g_k) + sum_k w_k b_k:
  // the products of every row go on while the statistics are summed, and
  // the row sums, the statistics and the two sums over the weights reduce
  // together, one exchange between the program's warps. w g and w b are
  // formed once a chunk for all rows (the normalised activations were
  // formed once a row).
  std::vector<F32> shifts;
  std::vector<Tile<f32, KC>> stats; // sum d, sum d^2 of row 0, then of row 1, ...
  std::optional<Tile<f32, BN, KC>> wg, wb;
  if constexpr (LN) {
    for (int m = 0; m < BM; ++m) {
      auto shift = cast<f32>(load(x + minimum(I32(m), M - 1) * K));
      auto s = zeros<f32, KC>(), q = zeros<f32, KC>();
      for (int c = 0; c < chunks; ++c) {
        auto k = c * KC + ck;
        auto v = cast<f32>(load(x + m * K + k, rowMask(m, c, k), 0));
        auto d = ragged && c == chunks - 1 ? where(k < K, v - shift, 0.0f) : v - shift;
        s = s + d;
        q = q + d * d;
      }
      shifts.push_back(shift);
      stats.push_back(s);
      stats.push_back(q);
    }
    wg = zeros<f32, BN, KC>();
    wb = zeros<f32, BN, KC>();
  }
  for (int c = 0; c < chunks; ++c) {
    auto w = cast<f32>(ws[std::size_t(c)]);
    if constexpr (LN) {
      // Past K (a ragged last chunk) w is 0, and so is every product.
      auto g = cast<f32>(preload ? gs[std::size_t(c)] : alongK(lnw, c));
      auto beta = cast<f32>(preload ? bs[std::size_t(c)] : alongK(lnb, c));
      *wb = *wb + w * beta;
      w = w * g;
      *wg = *wg + w;
    }
    for (int m = 0; m < BM; ++m) {
      auto a = cast<f32>(preload ? as[std::size_t(c * BM + m)] : activation(m, c));
      if constexpr (LN)
        a = a - shifts[std::size_t(m)];
      acc[m] = acc[m] + w * a;
    }
  }
  std::vector<F32> sums;
  for (auto &p : stats)
    sums.push_back(sum(p));
  std::vector<Tile<f32, BN>> out;
  for (int m = 0; m < BM; ++m)
    out.push_back(sum<1>(acc[m]));
  if constexpr (LN) {
    auto sg = sum<1>(*wg), sb = sum<1>(*wb);
    for (int m = 0; m < BM; ++m) {
      auto ds = sums[std::size_t(2 * m)] / float(K), dq = sums[std::size_t(2 * m + 1)] / float(K);
      auto rstd = rsqrt(maximum(dq - ds * ds, 0.0f) + eps);
      out[std::size_t(m)] = (out[std::size_t(m)] - ds * sg) * rstd + sb;
    }
  }
  return out;
}

/// 32-bit registers a thread of a decode-row kernel (decode_rows: BM rows,
/// BN columns, K inputs in chunks of KC, on `warps` warps) holds for its
/// accumulators, its weights in flight and its preloaded activations (and,
/// with LN, layernorm weights and the two weight sums): an estimate, for
/// pruning. A kernel built on decode_rows that holds more states how much:
/// `weight_sets` sets of weight chunks, `extra_accumulators` more (BN, KC)
/// f32 tiles.
template <class T, int BM, int BN, int K, int KC, bool LN>
constexpr int decode_registers(int warps, int weight_sets = 1, int extra_accumulators = 0) {
  constexpr int bytes = int(sizeof(typename T::host));
  constexpr int chunks = (K + KC - 1) / KC;
  constexpr int sums = LN ? 2 : 0; // the layernorm's sums over w g and w b
  int threads = warps * 32;
  int tile = BN * KC * bytes / 4 / threads; // registers of one (BN, KC) tile of T
  int acc = (BM + sums + extra_accumulators) * BN * KC / threads;
  int weights = weight_sets * chunks * tile;
  int preloaded = BM * chunks <= 16 ? (BM + sums) * chunks * tile : 0;
  return acc + weights + preloaded;
}

/// Whether a decode-row kernel of BN columns in chunks of KC can run with
/// these options: the plain schedule, and every thread loading at least 16
/// bytes of each weight chunk.
template <class T, int BN, int KC> constexpr bool decode_schedule(int warps, int stages, int schedule) {
  return schedule == 0 && stages == 2 && BN * KC * int(sizeof(typename T::host)) >= warps * 32 * 16;
}

/// The options a decode-row kernel of BM rows, BN columns and K inputs in
/// chunks of KC runs with: decode_schedule, and no more than 160 registers
/// a thread (decode_registers; more spills, and tuning would only time the
/// spills).
template <class T, int BM, int BN, int K, int KC, bool LN>
constexpr bool decode_feasible(int warps, int stages, int schedule) {
  return decode_schedule<T, BN, KC>(warps, stages, schedule) &&
         decode_registers<T, BM, BN, K, KC, LN>(warps) <= 160;
}

} // namespace detail

/// Output columns a program of an untuned decode kernel of BM rows over K
/// inputs (chunks of KC): WANT where that fits the register budget of
/// decode_feasible at the default 4 warps, else 4. A row of GPT-2 1.5B's
/// 1600-wide layernorm products (the MLP's up product, QKV) at 8 columns
/// spilled 276 bytes a thread on sm_90a and took ~20 us a launch on an H100;
/// at 4 it does not spill, and 4 is what the tuner picks there and at 774M.
template <class T, int BM, int K, int KC, bool LN, int WANT> constexpr int decode_columns() {
  if constexpr (WANT > 4 && !detail::decode_feasible<T, BM, WANT, K, KC, LN>(4, 2, 0))
    return 4;
  else
    return WANT;
}

namespace detail {

/// Columns `rn` of row m, valid when m < M and n < N.
template <int BN> Tile<i1, BN> row_mask(Tile<i32, BN> rn, I32 M, I32 N, int m) {
  return rn < minimum(N, (M - m) * N);
}

} // namespace detail

enum class DecodeEpilogue { None, Bias, BiasGelu, BiasResidual };

/// `out = in @ wt^T` (+ bias, then gelu; or + bias + res, where `res` may be
/// `out`: each program reads its residual columns before any of its stores,
/// and only this program touches those columns). The grid also brings the
/// `pf_count` elements from `pf` into L2 (a later kernel's weights; none
/// when 0), each program its share, after its own weight loads.
template <class T, int BM_, int BN_, int K_, int KC_, bool LN_, DecodeEpilogue E_>
struct DecodeLinear {
  static constexpr int BM = BM_, BN = BN_, K = K_, KC = KC_;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return detail::decode_feasible<T, BM_, BN_, K_, KC_, LN_>(warps, stages, schedule);
  }
  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, Ptr<T> bias, Ptr<T> res,
                  Ptr<T> out, I32 M, I32 N, F32 eps, Ptr<T> pf, I32 pf_count) const {
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>();
    std::optional<Tile<f32, BN>> bv;
    if constexpr (E_ != DecodeEpilogue::None)
      bv = cast<f32>(load(bias + rn, rn < N, 0));
    std::vector<Tile<f32, BN>> r;
    auto acc = detail::decode_rows<T, BM, BN, K, KC, LN_>(x, lnw, lnb, wt, M, N, eps, rn, pf, pf_count, [] {}, [&] {
      if constexpr (E_ == DecodeEpilogue::BiasResidual)
        for (int m = 0; m < BM; ++m)
          r.push_back(cast<f32>(load(res + m * N + rn, detail::row_mask(rn, M, N, m), 0)));
    });
    for (int m = 0; m < BM; ++m) {
      auto v = acc[m];
      if constexpr (E_ != DecodeEpilogue::None)
        v = v + *bv;
      if constexpr (E_ == DecodeEpilogue::BiasGelu)
        v = gelu_tanh(v);
      if constexpr (E_ == DecodeEpilogue::BiasResidual)
        v = v + r[m];
      store(out + m * N + rn, cast<T>(v), detail::row_mask(rn, M, N, m));
    }
  }
};

/// The QKV projection of a decode step: `qkv = layernorm(x) @ wt^T + bias`,
/// whose k and v parts (N = 3C) also go into the caches at row
/// m * Tmax + pos[m]: no cache-write launch. Prefetches like DecodeLinear.
template <class T, int BM_, int BN_, int K_, int KC_> struct DecodeQkv {
  static constexpr int BM = BM_, BN = BN_, K = K_, KC = KC_;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return detail::decode_feasible<T, BM_, BN_, K_, KC_, true>(warps, stages, schedule);
  }
  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, Ptr<T> bias, Ptr<T> qkv,
                  Ptr<i32> pos, Ptr<T> kc, Ptr<T> vc, I32 M, I32 N, I32 Tmax, F32 eps, Ptr<T> pf,
                  I32 pf_count) const {
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>();
    // Everything the epilogue reads is loaded first, with the weights. The
    // positions too: a step's first kernel (ops::Embedding) starts only once
    // the previous step, which advanced them, has completed, and no kernel
    // of this step writes them.
    auto bv = cast<f32>(load(bias + rn, rn < N, 0));
    std::vector<I32> at;
    for (int m = 0; m < BM; ++m)
      at.push_back(load(pos + minimum(I32(m), M - 1)));
    auto acc = detail::decode_rows<T, BM, BN, K, KC, true>(x, lnw, lnb, wt, M, N, eps, rn, pf, pf_count, [] {},
                                                           [] {});
    auto C = N / 3;
    for (int m = 0; m < BM; ++m) {
      auto mask = detail::row_mask(rn, M, N, m);
      auto v = cast<T>(acc[m] + bv);
      store(qkv + m * N + rn, v, mask);
      auto dst = (m * Tmax + at[std::size_t(m)]) * C;
      store(kc + (dst + rn - C), v, mask & (rn >= C) & (rn < 2 * C));
      store(vc + (dst + rn - 2 * C), v, mask & (rn >= 2 * C));
    }
  }
};

/// A decode step's whole MLP in one launch:
///   out = x + gelu(layernorm(x) @ wu^T + bu) @ wd + bd,
/// the hidden layer never leaving the program that computes it. Program p
/// takes the BH hidden units p * BH .. (p + 1) * BH - 1: their rows of the
/// up projection's transposed weight `wu` ([H, C]) and of the down
/// projection's weight `wd` ([H, C], as the prefill products take it), both
/// loaded before the wait (decode_rows), so every program streams one
/// contiguous slice of each. It forms its BH hidden values (rounded to T,
/// as the two-launch MLP stores them), multiplies them by its rows of wd
/// and adds the (C) partial sums of each row to `acc` ([BM, C] f32, zero
/// between launches) with atomic_accumulate; the last program to count
/// (`counter`, zero between launches) adds the bias and the residual x,
/// writes `out` (which may be x: every program has read x before it
/// counts), and zeroes acc and the counter. The order of the additions
/// varies, so the f32 sums (not the T results, mostly) may differ between
/// runs in their last bits. Grid: (cdiv(H, BH)).
template <class T, int BM_, int BH_, int C_, int KC_> struct DecodeMlp {
  static constexpr int BM = BM_, BN = BH_, K = C_, KC = KC_;
  static_assert(C_ % KC_ == 0, "DecodeMlp: the model width is whole chunks");
  /// decode_feasible's estimate with the down projection's weights (a
  /// second set of chunks) and a (BH, KC) f32 product tile on top, within
  /// 200 registers a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return detail::decode_schedule<T, BH_, KC_>(warps, stages, schedule) &&
           detail::decode_registers<T, BM_, BH_, C_, KC_, true>(warps, 2, 1) <= 200;
  }
  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wu, Ptr<T> bu, Ptr<T> wd, Ptr<T> bd, Ptr<T> out,
                  Ptr<f32> acc, Ptr<i32> counter, I32 M, I32 H, F32 eps, Ptr<T> pf, I32 pf_count) const {
    constexpr int chunks = C_ / KC_;
    launch_dependents();
    auto rh = program_id(0) * BH_ + arange<BH_>();
    auto ck = arange<KC_>();
    auto live = broadcast_to<BH_, KC_>(expand_dims<1>(rh < H));
    auto buv = cast<f32>(load(bu + rh, rh < H, 0));
    std::vector<Tile<T, BH_, KC_>> down;
    auto up = detail::decode_rows<T, BM_, BH_, C_, KC_, true>(
        x, lnw, lnb, wu, M, H, eps, rh, pf, pf_count,
        [&] {
          for (int c = 0; c < chunks; ++c)
            down.push_back(load(wd + expand_dims<1>(rh) * C_ + expand_dims<0>(c * KC_ + ck), live, 0));
        },
        [] {});
    for (int m = 0; m < BM_; ++m) {
      // Hidden units past H have no weights (zeros): they add nothing.
      auto hidden = expand_dims<1>(cast<f32>(cast<T>(gelu_tanh(up[std::size_t(m)] + buv))));
      auto row = broadcast_to<KC_>(I32(m) < M);
      for (int c = 0; c < chunks; ++c)
        atomic_accumulate(acc + m * C_ + c * KC_ + ck, sum<0>(cast<f32>(down[std::size_t(c)]) * hidden), row);
    }
    detail::when(atomic_add(counter, I32(1)) == num_programs(0) - 1, [&] {
      for (int m = 0; m < BM_; ++m) {
        auto row = broadcast_to<KC_>(I32(m) < M);
        for (int c = 0; c < chunks; ++c) {
          auto cols = c * KC_ + ck;
          auto total = load(acc + m * C_ + cols, row, 0.0f);
          auto res = cast<f32>(load(x + m * C_ + cols, row, 0));
          store(out + m * C_ + cols, cast<T>(total + cast<f32>(load(bd + cols)) + res), row);
          store(acc + m * C_ + cols, zeros<f32, KC_>(), row);
        }
      }
      store(counter, I32(0));
    });
  }
};

} // namespace kiln::ops
