//===- decoder.hpp - embedding, KV-cache writes and greedy sampling --------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/elementwise.hpp"

#include <tuple>

namespace kiln::ops {

/// `out[r] = wte[tok[r]] + wpe[pos[r]]` over rows of C columns. Grid: (rows).
template <class T, int BLOCK> struct Embedding {
  void operator()(Ptr<i32> tok, Ptr<i32> pos, Ptr<T> wte, Ptr<T> wpe, Ptr<T> out, I32 C) const {
    auto r = program_id(0);
    auto t = load(tok + r), p = load(pos + r);
    auto cols = arange<BLOCK>();
    for_range(0, C, BLOCK, [&](I32 c0) {
      auto c = c0 + cols;
      auto mask = c < C;
      auto e = cast<f32>(load(wte + t * C + c, mask, 0)) + cast<f32>(load(wpe + p * C + c, mask, 0));
      store(out + r * C + c, cast<T>(e), mask);
    });
  }
};

/// Copies the k and v parts of `qkv` row r into the caches at row
/// (b0 + r / rows_per_seq) * Tmax + pos[r]. Grid: (rows).
template <class T, int BLOCK> struct KvWrite {
  void operator()(Ptr<T> qkv, Ptr<i32> pos, Ptr<T> kc, Ptr<T> vc, I32 b0, I32 rows_per_seq, I32 C,
                  I32 Tmax) const {
    auto r = program_id(0);
    auto dst = ((b0 + r / rows_per_seq) * Tmax + load(pos + r)) * C;
    auto cols = arange<BLOCK>();
    for_range(0, C, BLOCK, [&](I32 c0) {
      auto c = c0 + cols;
      auto mask = c < C;
      store(kc + dst + c, load(qkv + r * (3 * C) + C + c, mask, 0), mask);
      store(vc + dst + c, load(qkv + r * (3 * C) + 2 * C + c, mask, 0), mask);
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
  void operator()(Ptr<T> logits, Ptr<i32> next, Ptr<i32> pos, I32 V, I32 ld, I32 advance) const {
    auto r = program_id(0);
    auto cols = arange<BLOCK>();
    auto init = std::tuple{full<f32, BLOCK>(-3.0e38f), zeros<i32, BLOCK>()};
    auto [best, at] = for_range(0, V, BLOCK, init, [&](I32 c0, Tile<f32, BLOCK> best, Tile<i32, BLOCK> at) {
      auto c = c0 + cols;
      auto x = cast<f32>(load(logits + r * ld + c, c < V, -3.0e38f));
      auto better = x > best; // strict: a lane keeps its first maximum
      return std::tuple{where(better, x, best), where(better, c, at)};
    });
    auto m = max(best);
    auto first = min(where(best == m, at, 2147483647));
    store(next + r, first);
    store(pos + r, load(pos + r) + advance);
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
    auto rm = program_id(0) * BM + arange<BM>();
    auto rn = program_id(1) * BN + arange<BN>();
    auto s = program_id(2);
    auto rows = expand_dims<1>(rm), cols = expand_dims<0>(rn);
    auto rk = arange<BK>();
    auto lo = s * k_split;
    auto hi = minimum(K, lo + k_split);
    auto acc = for_range(lo, hi, BK, zeros<f32, BM, BN>(), [&](I32 k0, Tile<f32, BM, BN> acc) {
      auto ka = expand_dims<0>(k0 + rk), kb = expand_dims<1>(k0 + rk);
      auto at = load(a + rows * lda + ka, (rows < M) & (ka < hi), 0);
      auto bt = load(b + kb * ldb + cols, (kb < hi) & (cols < N), 0);
      return dot(at, bt, acc);
    });
    store(partial + (s * M + rows) * N + cols, acc, (rows < M) & (cols < N));
  }
};

enum class Epilogue { Bias, BiasGelu, BiasResidual, None };

/// `c[m, n] = sum_s partial[s, m, n]` (+ bias[n], then gelu, or + res[m, n]).
/// Grid: (M, cdiv(N, BLOCK)).
template <class T, int BLOCK, Epilogue E> struct SplitKEpilogue {
  void operator()(Ptr<f32> partial, Ptr<T> bias, Ptr<T> res, Ptr<T> c, I32 M, I32 N, I32 splits) const {
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
