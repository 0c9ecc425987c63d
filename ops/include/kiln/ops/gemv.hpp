//===- gemv.hpp - linear layers of a decode step (a few rows) --------------===//
//
// A decode step multiplies one to a few activation rows by each weight
// matrix: it is bound by reading the weights once, and by latency. These
// kernels take the weight transposed ([N, K], a row per output column), so
// a program streams whole rows of it with 16-byte loads, and each program
// covers the whole of K: no split-K, no partial sums in memory, no second
// launch. K is a field of the kernel object, fixed at trace time, and the
// K loop is unrolled while tracing, so every weight load of a program is
// independent of the others and all of them can be in flight at once. Only
// the tile shapes (BN output columns a program, KC inputs a chunk) are
// template parameters; rows, K, the fused layernorm and the epilogue are
// values, so one compiled host function traces every model width.
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
#include "kiln/ops/epilogue.hpp"
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
template <class T, int BN, int KC, class BeforeWait, class AfterWait>
std::vector<Tile<f32, BN>> decode_rows(int BM, int K, bool LN, Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt,
                                       I32 M, I32 N, F32 eps, Tile<i32, BN> rn, Ptr<T> pf, I32 pf_count,
                                       BeforeWait beforeWait, AfterWait afterWait) {
  static_assert(KC % 8 == 0, "decode_rows: chunks of whole 16-byte groups");
  if (BM < 1 || K < 1)
    throw Error("decode kernels: rows and K must be at least 1 (got " + std::to_string(BM) + " and " +
                std::to_string(K) + ")");
  const int chunks = (K + KC - 1) / KC;
  const bool ragged = K % KC != 0;
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
  std::vector<Tile<f32, BN, KC>> acc(std::size_t(BM), zeros<f32, BN, KC>());
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
  const bool preload = BM * chunks <= 16;
  auto alongK = [&](Ptr<T> p, int c) { // (BN, KC) of p[k], k in chunk c
    auto kk = kAt(c);
    return ragged && c == chunks - 1 ? load(p + kk, kk < K, 0) : load(p + kk);
  };
  auto activation = [&](int m, int c) {
    auto kk = kAt(c);
    return load(x + m * K + kk, rowMask(m, c, kk), 0);
  };
  std::vector<Tile<T, BN, KC>> as, gs, bs;
  if (preload && LN)
    for (int c = 0; c < chunks; ++c) {
      gs.push_back(alongK(lnw, c));
      bs.push_back(alongK(lnb, c));
    }
  beforeWait();
  prefetch_share(pf, pf_count);
  grid_dependency_wait();
  afterWait();
  if (preload)
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
  if (LN) {
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
    if (LN) {
      // Past K (a ragged last chunk) w is 0, and so is every product.
      auto g = cast<f32>(preload ? gs[std::size_t(c)] : alongK(lnw, c));
      auto beta = cast<f32>(preload ? bs[std::size_t(c)] : alongK(lnb, c));
      *wb = *wb + w * beta;
      w = w * g;
      *wg = *wg + w;
    }
    for (int m = 0; m < BM; ++m) {
      auto a = cast<f32>(preload ? as[std::size_t(c * BM + m)] : activation(m, c));
      if (LN)
        a = a - shifts[std::size_t(m)];
      acc[std::size_t(m)] = acc[std::size_t(m)] + w * a;
    }
  }
  std::vector<F32> sums;
  for (auto &p : stats)
    sums.push_back(sum(p));
  std::vector<Tile<f32, BN>> out;
  for (int m = 0; m < BM; ++m)
    out.push_back(sum<1>(acc[std::size_t(m)]));
  if (LN) {
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
template <class T>
constexpr int decode_registers(int BM, int BN, int K, int KC, bool LN, int warps, int weight_sets = 1,
                               int extra_accumulators = 0) {
  const int bytes = int(sizeof(typename T::host));
  const int chunks = (K + KC - 1) / KC;
  const int sums = LN ? 2 : 0; // the layernorm's sums over w g and w b
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
template <class T> constexpr bool decode_schedule(int BN, int KC, int warps, int stages, int schedule) {
  return schedule == 0 && stages == 2 && BN * KC * int(sizeof(typename T::host)) >= warps * 32 * 16;
}

/// The options a decode-row kernel of BM rows, BN columns and K inputs in
/// chunks of KC runs with: decode_schedule, and no more than 160 registers
/// a thread (decode_registers; more spills, and tuning would only time the
/// spills).
template <class T>
constexpr bool decode_feasible(int BM, int BN, int K, int KC, bool LN, int warps, int stages, int schedule) {
  return decode_schedule<T>(BN, KC, warps, stages, schedule) && decode_registers<T>(BM, BN, K, KC, LN, warps) <= 160;
}

} // namespace detail

/// Output columns a program of an untuned decode kernel of BM rows over K
/// inputs (chunks of KC): WANT where that fits the register budget of
/// decode_feasible at the default 4 warps, else 4. A row of GPT-2 1.5B's
/// 1600-wide layernorm products (the MLP's up product, QKV) at 8 columns
/// spilled 276 bytes a thread on sm_90a and took ~20 us a launch on an H100;
/// at 4 it does not spill, and 4 is what the tuner picks there and at 774M.
template <class T> constexpr int decode_columns(int BM, int K, int KC, bool LN, int want) {
  return want > 4 && !detail::decode_feasible<T>(BM, want, K, KC, LN, 4, 2, 0) ? 4 : want;
}

/// Calls f.template operator()<BN>() with BN = `columns`, one of the
/// decode kernels' column tiles (4, 8, 16); throws Error for another.
template <class F> decltype(auto) with_decode_columns(int columns, F &&f) {
  switch (columns) {
  case 4: return f.template operator()<4>();
  case 8: return f.template operator()<8>();
  case 16: return f.template operator()<16>();
  }
  throw Error("decode kernels: " + std::to_string(columns) + " columns a program (4, 8 or 16)");
}

namespace detail {

/// Columns `rn` of row m, valid when m < M and n < N.
template <int BN> Tile<i1, BN> row_mask(Tile<i32, BN> rn, I32 M, I32 N, int m) {
  return rn < minimum(N, (M - m) * N);
}

} // namespace detail

/// `out = in @ wt^T` (+ bias, then gelu; or + bias + res, where `res` may be
/// `out`: each program reads its residual columns before any of its stores,
/// and only this program touches those columns) for up to `rows` rows of K
/// inputs. The grid also brings the `pf_count` elements from `pf` into L2
/// (a later kernel's weights; none when 0), each program its share, after
/// its own weight loads. BN columns a program, K in chunks of KC.
template <class T, int BN_, int KC_ = 256> struct DecodeLinear {
  static constexpr int BN = BN_, KC = KC_;
  int rows = 1;   ///< rows a launch computes (M <= rows)
  int k = 0;      ///< input features
  bool ln = false; ///< `in` is layernorm(x) (weights lnw, lnb)
  Epilogue epilogue = Epilogue::None;

  std::string config() const {
    return "r" + std::to_string(rows) + "_k" + std::to_string(k) + (ln ? "_ln" : "") + "_" +
           epilogue_name(epilogue);
  }
  bool feasible(int warps, int stages, int schedule) const {
    return detail::decode_feasible<T>(rows, BN, k, KC, ln, warps, stages, schedule);
  }
  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, Ptr<T> bias, Ptr<T> res,
                  Ptr<T> out, I32 M, I32 N, F32 eps, Ptr<T> pf, I32 pf_count) const {
    const Epilogue E = epilogue;
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>();
    std::optional<Tile<f32, BN>> bv;
    if (E != Epilogue::None)
      bv = cast<f32>(load(bias + rn, rn < N, 0));
    std::vector<Tile<f32, BN>> r;
    auto acc = detail::decode_rows<T, BN, KC>(rows, k, ln, x, lnw, lnb, wt, M, N, eps, rn, pf, pf_count, [] {}, [&] {
      if (E == Epilogue::BiasResidual)
        for (int m = 0; m < rows; ++m)
          r.push_back(cast<f32>(load(res + m * N + rn, detail::row_mask(rn, M, N, m), 0)));
    });
    for (int m = 0; m < rows; ++m) {
      auto v = acc[std::size_t(m)];
      if (E != Epilogue::None)
        v = v + *bv;
      if (E == Epilogue::BiasGelu)
        v = gelu_tanh(v);
      if (E == Epilogue::BiasResidual)
        v = v + r[std::size_t(m)];
      store(out + m * N + rn, cast<T>(v), detail::row_mask(rn, M, N, m));
    }
  }
};

/// The QKV projection of a decode step: `qkv = layernorm(x) @ wt^T + bias`
/// for up to `rows` rows of K = C inputs, whose k and v parts (N = 3C) also
/// go into the caches at row m * Tmax + pos[m]: no cache-write launch.
/// Prefetches like DecodeLinear.
template <class T, int BN_, int KC_ = 256> struct DecodeQkv {
  static constexpr int BN = BN_, KC = KC_;
  int rows = 1;
  int k = 0;

  std::string config() const { return "r" + std::to_string(rows) + "_k" + std::to_string(k); }
  bool feasible(int warps, int stages, int schedule) const {
    return detail::decode_feasible<T>(rows, BN, k, KC, true, warps, stages, schedule);
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
    for (int m = 0; m < rows; ++m)
      at.push_back(load(pos + minimum(I32(m), M - 1)));
    auto acc = detail::decode_rows<T, BN, KC>(rows, k, true, x, lnw, lnb, wt, M, N, eps, rn, pf, pf_count, [] {},
                                              [] {});
    auto C = N / 3;
    for (int m = 0; m < rows; ++m) {
      auto mask = detail::row_mask(rn, M, N, m);
      auto v = cast<T>(acc[std::size_t(m)] + bv);
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
/// and adds the (C) partial sums of each row to `acc` ([rows, C] f32, zero
/// between launches) with atomic_accumulate; the last program to count
/// (`counter`, zero between launches) adds the bias and the residual x,
/// writes `out` (which may be x: every program has read x before it
/// counts), and zeroes acc and the counter. The order of the additions
/// varies, so the f32 sums (not the T results, mostly) may differ between
/// runs in their last bits. Grid: (cdiv(H, BH)). The model width `c` is
/// whole chunks of KC.
template <class T, int BH_, int KC_> struct DecodeMlp {
  static constexpr int BN = BH_, KC = KC_;
  int rows = 1;
  int c = 0; ///< the model width C

  std::string config() const { return "r" + std::to_string(rows) + "_c" + std::to_string(c); }
  /// decode_feasible's estimate with the down projection's weights (a
  /// second set of chunks) and a (BH, KC) f32 product tile on top, within
  /// 200 registers a thread.
  bool feasible(int warps, int stages, int schedule) const {
    return c % KC_ == 0 && detail::decode_schedule<T>(BH_, KC_, warps, stages, schedule) &&
           detail::decode_registers<T>(rows, BH_, c, KC_, true, warps, 2, 1) <= 200;
  }
  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wu, Ptr<T> bu, Ptr<T> wd, Ptr<T> bd, Ptr<T> out,
                  Ptr<f32> acc, Ptr<i32> counter, I32 M, I32 H, F32 eps, Ptr<T> pf, I32 pf_count) const {
    if (c % KC_ != 0)
      throw Error("DecodeMlp: the model width " + std::to_string(c) + " is not whole chunks of " +
                  std::to_string(KC_));
    const int C = c, chunks = c / KC_;
    launch_dependents();
    auto rh = program_id(0) * BH_ + arange<BH_>();
    auto ck = arange<KC_>();
    auto live = broadcast_to<BH_, KC_>(expand_dims<1>(rh < H));
    auto buv = cast<f32>(load(bu + rh, rh < H, 0));
    std::vector<Tile<T, BH_, KC_>> down;
    auto up = detail::decode_rows<T, BH_, KC_>(
        rows, C, true, x, lnw, lnb, wu, M, H, eps, rh, pf, pf_count,
        [&] {
          for (int j = 0; j < chunks; ++j)
            down.push_back(load(wd + expand_dims<1>(rh) * C + expand_dims<0>(j * KC_ + ck), live, 0));
        },
        [] {});
    for (int m = 0; m < rows; ++m) {
      // Hidden units past H have no weights (zeros): they add nothing.
      auto hidden = expand_dims<1>(cast<f32>(cast<T>(gelu_tanh(up[std::size_t(m)] + buv))));
      auto row = broadcast_to<KC_>(I32(m) < M);
      for (int j = 0; j < chunks; ++j)
        atomic_accumulate(acc + m * C + j * KC_ + ck, sum<0>(cast<f32>(down[std::size_t(j)]) * hidden), row);
    }
    detail::when(atomic_add(counter, I32(1)) == num_programs(0) - 1, [&] {
      for (int m = 0; m < rows; ++m) {
        auto row = broadcast_to<KC_>(I32(m) < M);
        for (int j = 0; j < chunks; ++j) {
          auto cols = j * KC_ + ck;
          auto total = load(acc + m * C + cols, row, 0.0f);
          auto res = cast<f32>(load(x + m * C + cols, row, 0));
          store(out + m * C + cols, cast<T>(total + cast<f32>(load(bd + cols)) + res), row);
          store(acc + m * C + cols, zeros<f32, KC_>(), row);
        }
      }
      store(counter, I32(0));
    });
  }
};

} // namespace kiln::ops
