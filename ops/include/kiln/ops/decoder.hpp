//===- decoder.hpp - embedding, KV-cache writes and greedy sampling --------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/matmul.hpp"

#include <optional>
#include <tuple>
#include <vector>

namespace kiln::ops {

// The kernels of a decode step after its first (Embedding) wait on the
// kernel before them (grid_dependency_wait) rather than being serialised
// after it, and every one lets the next launch at once (launch_dependents):
// each launch overlaps the previous kernel's tail.

/// `out[r] = wte[tok[r]] + wpe[pos[r]]` over rows of C columns. Grid: (rows).
///
/// The first kernel of a step, launched the ordinary way: it starts once
/// every kernel before it has completed. The kernels after it start while
/// the one before them ends and may read, before they wait on it, what the
/// previous steps wrote (the QKV product loads the positions early, decode
/// attention the positions and the earlier keys).
template <class T, int BLOCK> struct Embedding {
  /// Plain schedule, one stage, at least one element a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BLOCK >= warps * 32;
  }
  void operator()(Ptr<i32> tok, Ptr<i32> pos, Ptr<T> wte, Ptr<T> wpe, Ptr<T> out, I32 C) const {
    launch_dependents();
    auto r = program_id(0);
    auto t = load(tok + r), p = load(pos + r);
    auto cols = arange<BLOCK>();
    for_range(0, C, BLOCK, [&](I32 c0) {
      auto c = c0 + cols;
      auto mask = c < C;
      auto e =
          cast<f32>(load(wte + t * C + c, mask, 0)) + cast<f32>(load(wpe + p * C + c, mask, 0));
      store(out + r * C + c, cast<T>(e), mask);
    });
  }
};

/// Copies the k and v parts of `qkv` row r into the caches at row
/// seq[r] * Tmax + pos[r]. Grid: (rows).
template <class T, int BLOCK> struct KvWrite {
  /// Plain schedule, one stage, at least one element a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BLOCK >= warps * 32;
  }
  void operator()(Ptr<T> qkv, Ptr<i32> seq, Ptr<i32> pos, Ptr<T> kc, Ptr<T> vc, I32 C,
                  I32 Tmax) const {
    detail::wait_for_previous_kernel();
    auto r = program_id(0);
    auto dst = (load(seq + r) * Tmax + load(pos + r)) * C;
    auto cols = arange<BLOCK>();
    for_range(0, C, BLOCK, [&](I32 c0) {
      auto c = c0 + cols;
      auto mask = c < C;
      store(kc + dst + c, load(qkv + r * (3 * C) + C + c, mask, 0), mask);
      store(vc + dst + c, load(qkv + r * (3 * C) + 2 * C + c, mask, 0), mask);
    });
  }
};

/// `dst[r] = src[index[r]]` for rows of C columns. Grid: (rows).
template <class T, int BLOCK> struct GatherRows {
  /// Plain schedule, one stage, at least one element a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BLOCK >= warps * 32;
  }
  void operator()(Ptr<T> src, Ptr<i32> index, Ptr<T> dst, I32 C) const {
    detail::wait_for_previous_kernel();
    auto r = program_id(0);
    auto from = load(index + r);
    auto cols = arange<BLOCK>();
    for_range(0, C, BLOCK, [&](I32 c0) {
      auto c = c0 + cols;
      store(dst + r * C + c, load(src + from * C + c, c < C, 0), c < C);
    });
  }
};

/// Greedy sampling: `next[r]` = the index of the first maximum of logits row
/// r (V columns, row stride ld); also advances `pos[r]` by `advance`, so
/// that a decode step needs nothing from the host. Grid: (rows).
///
/// Each lane keeps its own best (value, column) across the sweep, so the
/// loop is element-wise; one max and one min reduce the lanes at the end.
template <class T, int BLOCK> struct ArgmaxRows {
  /// Plain schedule, one stage, at least one element a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BLOCK >= warps * 32;
  }
  void operator()(Ptr<T> logits, Ptr<i32> next, Ptr<i32> pos, I32 V, I32 ld, I32 advance) const {
    detail::wait_for_previous_kernel();
    auto r = program_id(0);
    auto cols = arange<BLOCK>();
    auto init = std::tuple{full<f32, BLOCK>(-3.0e38f), zeros<i32, BLOCK>()};
    auto start = detail::aligned_first_column<T>(r * ld); // 16-byte loads at any ld
    auto [best, at] =
        for_range(start, V, BLOCK, init, [&](I32 c0, Tile<f32, BLOCK> best, Tile<i32, BLOCK> at) {
          auto c = c0 + cols;
          auto x = cast<f32>(load(logits + r * ld + c, (c >= 0) & (c < V), -3.0e38f));
          auto better = x > best; // strict: a lane keeps its first maximum
          return std::tuple{where(better, x, best), where(better, c, at)};
        });
    auto m = max(best);
    auto first = min(where(best == m, at, 2147483647));
    store(next + r, first);
    store(pos + r, load(pos + r) + advance);
  }
};

/// A counter-based hash of (key, index) to a uniform float in (0, 1),
/// reproducible on any backend: 32-bit wrapping multiplies and xors, with
/// signed division standing in for the shifts of a murmur-style finaliser.
template <int... D> Tile<f32, D...> uniform_hash(I32 key, Tile<i32, D...> index) {
  auto h = (index * -1640531535) ^ key; // 0x9E3779B1
  h = h ^ (h / 65536);
  h = h * -2048144789; // 0x85EBCA6B
  h = h ^ (h / 8192);
  h = h * -1028477387; // 0xC2B2AE35
  h = h ^ (h / 65536);
  return (cast<f32>(h / 256 + 8388608) + 0.5f) * (1.0f / 16777216.0f);
}

/// Sampling: `next[r]` is drawn from softmax(logits row r / temperature),
/// restricted to the top_k largest logits (0: all) and then to the smallest
/// set of those whose probability reaches top_p (1: all). Thresholds are
/// found by bisection over the logit values (sweeps of the row); the draw
/// is a Gumbel-max over the kept entries with noise from uniform_hash(seed,
/// pos[r], r), so replays of a captured decode step draw fresh numbers. Also
/// advances `pos[r]` by `advance`. Grid: (rows).
template <class T, int BLOCK> struct SampleRows {
  static constexpr int kBisections = 24;
  void operator()(Ptr<T> logits, Ptr<i32> next, Ptr<i32> pos, I32 V, I32 ld, I32 advance,
                  F32 temperature, I32 top_k, F32 top_p, I32 seed) const {
    detail::wait_for_previous_kernel();
    auto r = program_id(0);
    auto row = logits + r * ld;
    auto cols = arange<BLOCK>();
    auto step = load(pos + r);
    auto value = [&](Tile<i32, BLOCK> c) { return cast<f32>(load(row + c, c < V, 0)); };
    // Largest and smallest logit.
    auto init = std::tuple{full<f32, BLOCK>(-3.0e38f), full<f32, BLOCK>(3.0e38f)};
    auto [hiLane, loLane] =
        for_range(0, V, BLOCK, init, [&](I32 c0, Tile<f32, BLOCK> hi, Tile<f32, BLOCK> lo) {
          auto c = c0 + cols;
          auto x = value(c);
          return std::tuple{where(c < V, maximum(hi, x), hi), where(c < V, minimum(lo, x), lo)};
        });
    auto top = max(hiLane), bottom = min(loLane);
    // Temperatures below 1e-30 sample as 1e-30 does (the greedy limit): 1/T
    // stays finite, so (x - top) * inv_t is 0 at the top and never NaN.
    auto inv_t = 1.0f / maximum(temperature, 1e-30f);
    // How many logits are >= t, and their unnormalised probability mass.
    auto above = [&](F32 t) {
      auto z = std::tuple{zeros<f32, BLOCK>(), zeros<f32, BLOCK>()};
      auto [n, mass] =
          for_range(0, V, BLOCK, z, [&](I32 c0, Tile<f32, BLOCK> n, Tile<f32, BLOCK> mass) {
            auto c = c0 + cols;
            auto x = value(c);
            auto keep = (c < V) & (x >= t);
            return std::tuple{n + where(keep, full<f32, BLOCK>(1.0f), 0.0f),
                              mass + where(keep, exp((x - top) * inv_t), 0.0f)};
          });
      return std::tuple{sum(n), sum(mass)};
    };
    // top-k: the largest t with at least top_k logits >= t.
    auto kRounds = where(top_k > 0, I32(kBisections), I32(0));
    auto kSearch = for_range(0, kRounds, 1, std::tuple{bottom, top}, [&](I32, F32 lo, F32 hi) {
      auto mid = (lo + hi) * 0.5f;
      auto [n, mass] = above(mid);
      (void)mass;
      auto ok = n >= cast<f32>(top_k);
      return std::tuple{where(ok, mid, lo), where(ok, hi, mid)};
    });
    auto tk = std::get<0>(kSearch);
    // top-p: the largest t >= tk whose mass reaches top_p of the top-k mass.
    auto [nk, massK] = above(tk);
    (void)nk;
    auto pRounds = where(top_p < 1.0f, I32(kBisections), I32(0));
    auto pSearch = for_range(0, pRounds, 1, std::tuple{tk, top}, [&](I32, F32 lo, F32 hi) {
      auto mid = (lo + hi) * 0.5f;
      auto [n, mass] = above(mid);
      (void)n;
      auto ok = mass >= top_p * massK;
      return std::tuple{where(ok, mid, lo), where(ok, hi, mid)};
    });
    auto t = std::get<0>(pSearch);
    // Gumbel-max over the kept logits.
    auto key = seed * 668265263 + step * 374761393 + r * -1640531535;
    auto pick = std::tuple{full<f32, BLOCK>(-3.0e38f), zeros<i32, BLOCK>()};
    auto [best, at] =
        for_range(0, V, BLOCK, pick, [&](I32 c0, Tile<f32, BLOCK> best, Tile<i32, BLOCK> at) {
          auto c = c0 + cols;
          auto x = value(c);
          auto u = uniform_hash(key, c);
          auto score = where((c < V) & (x >= t), (x - top) * inv_t - log(-log(u)), -3.0e38f);
          auto better = score > best;
          return std::tuple{where(better, score, best), where(better, c, at)};
        });
    auto m = max(best);
    store(next + r, min(where(best == m, at, 2147483647)));
    store(pos + r, step + advance);
  }
};

/// Split-K matrix product for a few rows (decode): program (i, j, s) adds up
/// the K range [s * k_split, (s + 1) * k_split) of its (BM, BN) tile into
/// `partial[s]` (f32, [splits, M, N]); SplitKEpilogue finishes the sum.
/// Many programs stream the weights even when M is 1.
template <class T, int BM_, int BN_, int BK_> struct MatmulSplitK {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<f32> partial, I32 M, I32 N, I32 K, I32 lda, I32 ldb,
                  I32 k_split) const {
    detail::wait_for_previous_kernel();
    auto rm = program_id(0) * BM + arange<BM>();
    auto rn = program_id(1) * BN + arange<BN>();
    auto s = program_id(2);
    auto lo = s * k_split;
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, lo, minimum(K, lo + k_split), lda,
                                                  ldb, rm, rn);
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    store(partial + (s * M + rows) * N + cols, acc, (rows < M) & (cols < N));
  }
};

/// `c = E(a @ b)` for a few rows (a decode step of a batch, a short
/// prefill), split along K in one launch: program (i, j, s) multiplies row
/// tile i by column tile j over K range [s * k_split, (s + 1) * k_split)
/// and stores its f32 tile to `partial[s]` ([S, M, N]); the last of the S
/// programs of tile (i, j) to finish (counter[i * cdiv(N, BN) + j], which
/// it resets to 0) adds up the S tiles, applies the epilogue (+ bias, then
/// gelu; or + bias + res, where `res` may be `c`) and stores c. A product
/// of 8 rows and 768 columns thus streams its weights from S times as many
/// programs as it has tiles. Grid: (cdiv(M, BM), cdiv(N, BN), S), S >= 2.
template <class T, int BM_, int BN_, int BK_, Epilogue E> struct SplitKLinear {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<T> bias, Ptr<T> res, Ptr<T> c, Ptr<f32> partial,
                  Ptr<i32> counter, I32 M, I32 N, I32 K, I32 k_split) const {
    detail::wait_for_previous_kernel();
    auto i = program_id(0), j = program_id(1), s = program_id(2);
    auto S = num_programs(2);
    auto rm = i * BM + arange<BM>();
    auto rn = j * BN + arange<BN>();
    auto lo = s * k_split;
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, lo, minimum(K, lo + k_split), K, N,
                                                  rm, rn);
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    auto inside = (rows < M) & (cols < N);
    store(partial + (s * M + rows) * N + cols, acc, inside);
    // The last program of the tile: a loop of one iteration for it and none
    // for the others. Its atomic_add made every partial tile visible.
    auto tile = i * num_programs(1) + j;
    auto last = atomic_add(counter + tile, 1) == S - 1;
    for_range(0, where(last, I32(1), I32(0)), 1, [&](I32) {
      auto v = for_range(0, S, 1, zeros<f32, BM, BN>(), [&](I32 t, Tile<f32, BM, BN> sum) {
        return sum + load(partial + (t * M + rows) * N + cols, inside, 0.0f);
      });
      if constexpr (E != Epilogue::None)
        v = v + expand_dims<0>(cast<f32>(load(bias + rn, rn < N, 0)));
      if constexpr (E == Epilogue::BiasGelu)
        v = gelu_tanh<kApproxFor<T>>(v);
      if constexpr (E == Epilogue::BiasResidual)
        v = v + cast<f32>(load(res + rows * N + cols, inside, 0));
      store(c + rows * N + cols, cast<T>(v), inside);
      store(counter + tile, I32(0));
    });
  }
};

namespace detail {

/// The transposed tile acc(BN, BR) = wt[rn, lo:lo + C * KC] @ in[0:BR, same]^T
/// of a few-row product, where in is x, or with LN layernorm(x) (weights
/// lnw, lnb over K features, statistics in f32, rounded to T as a separate
/// layernorm would store it). Rows past M and columns past K read nothing.
///
/// The weight panel (and the layernorm weights of its K range) are loaded
/// first, all C chunks of 16-byte loads at once, then this program's share
/// of the `pf_count` elements from `pf` are brought into L2 (a later
/// kernel's weights; none when 0); then the program waits on the previous
/// kernel (grid_dependency_wait), calls `afterWait` (the caller's loads of
/// what earlier kernels write) and reads x.
template <class T, int BR, int BN, int KC, int C, bool LN, class AfterWait>
Tile<f32, BN, BR> few_rows_product(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, I32 M, I32 N, I32 K,
                                   F32 eps, Tile<i32, BN> rn, I32 lo, Ptr<T> pf, I32 pf_count,
                                   AfterWait afterWait) {
  auto ck = arange<KC>();
  auto xr = expand_dims<1>(arange<BR>()); // (BR, 1): rows of x
  auto live = xr < M;
  auto kAt = [&](int q) { return expand_dims<0>(lo + q * KC + ck); }; // (1, KC)
  std::vector<Tile<T, BN, KC>> ws;
  for (int q = 0; q < C; ++q)
    ws.push_back(load(wt + expand_dims<1>(rn) * K + kAt(q), expand_dims<1>(rn < N) & (kAt(q) < K), 0));
  // The layernorm's weights of the panel's K range, one row each (they
  // broadcast over the rows of x).
  std::vector<Tile<T, 1, KC>> gs, bs;
  if constexpr (LN)
    for (int q = 0; q < C; ++q) {
      gs.push_back(load(lnw + kAt(q), kAt(q) < K, 0));
      bs.push_back(load(lnb + kAt(q), kAt(q) < K, 0));
    }
  prefetch_share(pf, pf_count);
  grid_dependency_wait();
  afterWait();
  // With LN, each row's statistics over the whole of K (the panel may cover
  // only part of it) in one pass: C chunks of KC columns loaded together
  // per step (one step when the panel spans K), summed and squared into one
  // f32 per row, and the variance as E[x^2] - mean^2 (f32 over at most a
  // few thousand 16-bit values: its rounding error is far below the
  // output's).
  std::optional<Tile<f32, BR, 1>> mean, rstd;
  if constexpr (LN) {
    using Sums = std::tuple<Tile<f32, BR>, Tile<f32, BR>>;
    auto nf = cast<f32>(K);
    auto [total, squares] = for_range(0, K, C * KC, Sums{zeros<f32, BR>(), zeros<f32, BR>()},
                                      [&](I32 k0, Tile<f32, BR> s1, Tile<f32, BR> s2) {
      std::vector<Tile<f32, BR, KC>> vs;
      for (int q = 0; q < C; ++q) {
        auto kk = expand_dims<0>(k0 + q * KC + ck);
        vs.push_back(cast<f32>(load(x + xr * K + kk, live & (kk < K), 0)));
      }
      // The chunks summed elementwise first: two reductions a step, one
      // after the other (they share one exchange between warps).
      auto a = vs[0], sq = vs[0] * vs[0];
      for (std::size_t q = 1; q < vs.size(); ++q) {
        a = a + vs[q];
        sq = sq + vs[q] * vs[q];
      }
      auto r1 = sum<1>(a);
      auto r2 = sum<1>(sq);
      return Sums{s1 + r1, s2 + r2};
    });
    auto m = total / nf;
    mean = expand_dims<1>(m);
    rstd = expand_dims<1>(rsqrt(maximum(squares / nf - m * m, 0.0f) + eps));
  }
  std::vector<Tile<T, BR, KC>> xs;
  for (int q = 0; q < C; ++q) {
    auto v = load(x + xr * K + kAt(q), live & (kAt(q) < K), 0);
    if constexpr (LN) {
      auto y = (cast<f32>(v) - *mean) * *rstd * cast<f32>(gs[std::size_t(q)]) + cast<f32>(bs[std::size_t(q)]);
      v = cast<T>(where(live, y, 0.0f));
    }
    xs.push_back(v);
  }
  auto acc = zeros<f32, BN, BR>();
  for (int q = 0; q < C; ++q)
    acc = dot(ws[std::size_t(q)], trans(xs[std::size_t(q)]), acc);
  return acc;
}

/// Finishes program (j, s) of a few-row product of S = num_programs(1) K
/// ranges: with one range `finish(acc)`; otherwise stores acc to
/// `partial[s]` ([S, N, BR], f32) and the last of the S programs of column
/// tile j to finish (counter[j], reset to 0 by it) calls `finish` with the
/// sum of the S tiles in order s = 0..S-1 (the same sum whichever program is
/// last), `reduce` loads in flight at a time.
template <int BN, int BR, int reduce, class Finish>
void few_rows_finish(Tile<f32, BN, BR> acc, Ptr<f32> partial, Ptr<i32> counter, I32 N,
                     Tile<i32, BN> rn, Tile<i1, BN, BR> inside, Finish finish) {
  auto j = program_id(0), s = program_id(1);
  auto S = num_programs(1);
  when(S == 1, [&] { finish(acc); }); // the whole of K: nothing to add
  when(S > 1, [&] {
    auto at = [&](I32 t) { return partial + (t * N + expand_dims<1>(rn)) * BR + expand_dims<0>(arange<BR>()); };
    store(at(s), acc, inside);
    // The last program of the column tile adds the partial tiles; its
    // atomic_add made every one of them visible.
    when(atomic_add(counter + j, 1) == S - 1, [&] {
      auto v = for_range(0, S, reduce, zeros<f32, BN, BR>(), [&](I32 t0, Tile<f32, BN, BR> sum) {
        std::vector<Tile<f32, BN, BR>> part;
        for (int u = 0; u < reduce; ++u)
          part.push_back(load(at(t0 + u), inside & (t0 + u < S), 0.0f));
        for (auto &p : part)
          sum = sum + p;
        return sum;
      });
      finish(v);
      store(counter + j, I32(0));
    });
  });
}

} // namespace detail

/// `c = E(x @ wt^T)` for 2 to BR rows (a decode step of a batch), with the
/// weight taken transposed (`wt` [N, K], a row per output column, as the
/// decode GEMVs take it) and the operands of the tensor-core product
/// swapped: program (j, s) computes the transposed tile
///
///   acc(BN, BR) = wt[rn, lo:hi] @ x[0:BR, lo:hi]^T,  lo = s * C * KC,
///
/// so the BN weight rows are the mma's 16-row side and the few activation
/// rows its 8-wide side (nothing padded at 8 rows). What a program costs is
/// reading its (BN, C * KC) panel of the weight, and it reads all of it at
/// once, in C chunks of 16-byte loads issued before it waits on the previous
/// kernel (programmatic dependent launch): the panel is in flight while that
/// kernel ends, and every program of the grid is resident, so the whole
/// weight streams in one memory round trip. Rows past M read nothing.
///
/// With one K range (S = 1) a program finishes its tile; otherwise the
/// last program of a column tile adds the partial tiles
/// (detail::few_rows_finish: `partial` [S, N, BR] f32, `counter` [cdiv(N,
/// BN)] zero between launches). The epilogue: + bias, then gelu; or + bias
/// + res, where `res` may be `c`. c is [M, N]. The grid also brings the
/// `pf_count` elements from `pf` into L2 (a later kernel's weights; none
/// when 0), each program its share, after its panel.
/// Grid: (cdiv(N, BN), S) with S = cdiv(K, C * KC).
template <class T, int BR_, int BN_, int KC_, int C_, Epilogue E> struct FewRowsLinear {
  static constexpr int BR = BR_, BN = BN_, KC = KC_, C = C_;
  /// Partial tiles added per step of the last program's sum.
  static constexpr int kReduce = 8;
  /// Every warp owns at least one 16x8 tile of the product; every thread
  /// loads whole 16-byte groups of each chunk and holds at most 128
  /// registers of weights.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    constexpr int bytes = int(sizeof(typename T::host));
    int threads = warps * 32;
    return schedule == 0 && stages == 2 && BN % 16 == 0 && BR % 8 == 0 && (BN / 16) * (BR / 8) >= warps &&
           BN * KC * bytes >= threads * 16 && C * BN * KC * bytes / 4 / threads <= 128;
  }
  /// The K ranges a product of K inputs is split into (grid axis 1).
  static constexpr int splits(int K) { return (K + C * KC - 1) / (C * KC); }

  void operator()(Ptr<T> x, Ptr<T> wt, Ptr<T> bias, Ptr<T> res, Ptr<T> c, Ptr<f32> partial,
                  Ptr<i32> counter, I32 M, I32 N, I32 K, Ptr<T> pf, I32 pf_count) const {
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>(); // output columns: weight rows
    // The bias with the weight panel: nothing an earlier kernel writes.
    std::optional<Tile<f32, BN>> bv;
    if constexpr (E != Epilogue::None)
      bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto acc = detail::few_rows_product<T, BR, BN, KC, C, false>(x, x, x, wt, M, N, K, F32(0.0f), rn,
                                                                 program_id(1) * (C * KC), pf, pf_count, [] {});
    auto cols = expand_dims<1>(rn);           // (BN, 1)
    auto rows = expand_dims<0>(arange<BR>()); // (1, BR)
    auto inside = (cols < N) & (rows < M);
    detail::few_rows_finish<BN, BR, kReduce>(acc, partial, counter, N, rn, inside, [&](Tile<f32, BN, BR> v) {
      if constexpr (E != Epilogue::None)
        v = v + expand_dims<1>(*bv);
      if constexpr (E == Epilogue::BiasGelu)
        v = gelu_tanh<kApproxFor<T>>(v);
      if constexpr (E == Epilogue::BiasResidual)
        v = v + cast<f32>(load(res + rows * N + cols, inside, 0));
      store(c + rows * N + cols, cast<T>(v), inside);
    });
  }
};

/// FewRowsLinear after a layernorm of x (weights lnw, lnb; eps), fused:
/// `c = E(layernorm(x) @ wt^T)` with E = None (`bias` is not read), Bias or
/// BiasGelu. Each program computes the statistics of the rows over the
/// whole of K. Prefetches like FewRowsLinear.
/// Grid: (cdiv(N, BN), cdiv(K, C * KC)).
template <class T, int BR_, int BN_, int KC_, int C_, Epilogue E> struct FewRowsNormLinear {
  static_assert(E != Epilogue::BiasResidual, "FewRowsNormLinear: None, Bias or BiasGelu");
  using Plain = FewRowsLinear<T, BR_, BN_, KC_, C_, E>;
  static constexpr int BR = BR_, BN = BN_, KC = KC_, C = C_;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return Plain::feasible(warps, stages, schedule);
  }
  static constexpr int splits(int K) { return Plain::splits(K); }

  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, Ptr<T> bias, Ptr<T> c, Ptr<f32> partial,
                  Ptr<i32> counter, I32 M, I32 N, I32 K, F32 eps, Ptr<T> pf, I32 pf_count) const {
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>();
    std::optional<Tile<f32, BN>> bv;
    if constexpr (E != Epilogue::None)
      bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto acc = detail::few_rows_product<T, BR, BN, KC, C, true>(x, lnw, lnb, wt, M, N, K, eps, rn,
                                                                program_id(1) * (C * KC), pf, pf_count, [] {});
    auto cols = expand_dims<1>(rn);
    auto rows = expand_dims<0>(arange<BR>());
    auto inside = (cols < N) & (rows < M);
    detail::few_rows_finish<BN, BR, Plain::kReduce>(acc, partial, counter, N, rn, inside,
                                                    [&](Tile<f32, BN, BR> v) {
      if constexpr (E != Epilogue::None)
        v = v + expand_dims<1>(*bv);
      if constexpr (E == Epilogue::BiasGelu)
        v = gelu_tanh<kApproxFor<T>>(v);
      store(c + rows * N + cols, cast<T>(v), inside);
    });
  }
};

/// The QKV projection of a decode step of 2 to BR sequences, fused like
/// DecodeQkv: `qkv = layernorm(x) @ wt^T + bias` (N = 3 * width), whose k
/// and v parts also go into the caches at row m * Tmax + pos[m] of
/// sequence m: no layernorm and no cache-write launch. Without LN, x is
/// already normalised (`qkv = x @ wt^T + bias`; lnw, lnb and eps are not
/// read): no cache-write launch. Prefetches like FewRowsLinear.
/// Grid: (cdiv(N, BN), cdiv(K, C * KC)).
template <class T, int BR_, int BN_, int KC_, int C_, bool LN = true> struct FewRowsQkv {
  using Plain = FewRowsLinear<T, BR_, BN_, KC_, C_, Epilogue::Bias>;
  static constexpr int BR = BR_, BN = BN_, KC = KC_, C = C_;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return Plain::feasible(warps, stages, schedule);
  }
  static constexpr int splits(int K) { return Plain::splits(K); }

  void operator()(Ptr<T> x, Ptr<T> lnw, Ptr<T> lnb, Ptr<T> wt, Ptr<T> bias, Ptr<T> qkv, Ptr<f32> partial,
                  Ptr<i32> counter, Ptr<i32> pos, Ptr<T> kc, Ptr<T> vc, I32 M, I32 N, I32 K, I32 Tmax,
                  F32 eps, Ptr<T> pf, I32 pf_count) const {
    launch_dependents();
    auto rn = program_id(0) * BN + arange<BN>();
    auto bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto rm = arange<BR>();
    std::optional<Tile<i32, BR>> at;
    auto acc = detail::few_rows_product<T, BR, BN, KC, C, LN>(
        x, lnw, lnb, wt, M, N, K, eps, rn, program_id(1) * (C * KC), pf, pf_count,
        [&] { at = load(pos + rm, rm < M, 0); });
    auto cols = expand_dims<1>(rn);
    auto rows = expand_dims<0>(rm);
    auto inside = (cols < N) & (rows < M);
    auto W = N / 3;
    auto dst = (rows * Tmax + expand_dims<0>(*at)) * W; // (1, BR)
    detail::few_rows_finish<BN, BR, Plain::kReduce>(acc, partial, counter, N, rn, inside,
                                                    [&](Tile<f32, BN, BR> v) {
      auto y = cast<T>(v + expand_dims<1>(bv));
      store(qkv + rows * N + cols, y, inside);
      store(kc + (dst + cols - W), y, inside & (cols >= W) & (cols < 2 * W));
      store(vc + (dst + cols - 2 * W), y, inside & (cols >= 2 * W));
    });
  }
};

/// `c[m, n] = sum_s partial[s, m, n]` (+ bias[n], then gelu, or + res[m, n]).
/// Grid: (M, cdiv(N, BLOCK)).
template <class T, int BLOCK, Epilogue E> struct SplitKEpilogue {
  void operator()(Ptr<f32> partial, Ptr<T> bias, Ptr<T> res, Ptr<T> c, I32 M, I32 N,
                  I32 splits) const {
    detail::wait_for_previous_kernel();
    auto m = program_id(0);
    auto n = program_id(1) * BLOCK + arange<BLOCK>();
    auto mask = n < N;
    auto acc = for_range(0, splits, 1, zeros<f32, BLOCK>(), [&](I32 s, Tile<f32, BLOCK> acc) {
      return acc + load(partial + (s * M + m) * N + n, mask, 0.0f);
    });
    if constexpr (E != Epilogue::None)
      acc = acc + cast<f32>(load(bias + n, mask, 0));
    if constexpr (E == Epilogue::BiasGelu)
      acc = gelu_tanh(acc);
    if constexpr (E == Epilogue::BiasResidual)
      acc = acc + cast<f32>(load(res + m * N + n, mask, 0));
    store(c + m * N + n, cast<T>(acc), mask);
  }
};

} // namespace kiln::ops
