//===- decoder.hpp - embedding, KV-cache writes and greedy sampling --------===//
#pragma once

#include "kiln/kiln.hpp"

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
template <class T, int BLOCK> struct ArgmaxRows {
  void operator()(Ptr<T> logits, Ptr<i32> next, Ptr<i32> pos, I32 V, I32 ld, I32 advance) const {
    auto r = program_id(0);
    auto cols = arange<BLOCK>();
    auto init = std::tuple{F32(-3.0e38f), I32(0)};
    auto [best, at] = for_range(0, V, BLOCK, init, [&](I32 c0, F32 best, I32 at) {
      auto c = c0 + cols;
      auto x = where(c < V, cast<f32>(load(logits + r * ld + c, c < V, 0)), -3.0e38f);
      auto m = max(x);
      auto i = c0 + argmax(x);
      auto better = m > best; // strict: the first maximum wins
      return std::tuple{where(better, m, best), where(better, i, at)};
    });
    (void)best;
    store(next + r, at);
    store(pos + r, load(pos + r) + advance);
  }
};

} // namespace kiln::ops
