//===- softmax.hpp - row softmax ------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"

namespace kiln::ops {

/// y[r, :] = softmax(x[r, :]) over n_cols, computed in f32. One program per
/// row (grid: rows). With ONE_PASS the row must fit one block (n_cols <=
/// BLOCK) and is read once; otherwise any n_cols works: a first sweep keeps a
/// running max and rescaled sum per lane (online softmax), a second writes.
/// Non-finite inputs give what torch.softmax gives: NaN for a row that is all
/// -inf or holds +inf or NaN; -inf entries of other rows give 0.
template <class T, int BLOCK, bool ONE_PASS = false> struct Softmax {
  void operator()(Ptr<T> x, Ptr<T> y, I32 n_cols, I32 x_stride, I32 y_stride) const {
    auto row = program_id(0);
    auto cols = arange<BLOCK>(); // (BLOCK)
    auto x_row = x + row * x_stride;
    auto y_row = y + row * y_stride;
    if constexpr (ONE_PASS) {
      auto mask = cols < n_cols;
      auto v = cast<f32>(load(x_row + cols, mask, -inf));
      auto e = exp(v - max(v));
      store(y_row + cols, cast<T>(e / sum(e)), mask);
    } else {
      // Online softmax per lane: a running max m and the sum s of exp(v - m).
      // A lane whose max is still -inf (all its values -inf, or no column
      // yet) holds s = 0: exp(-inf - -inf) would be NaN. Everything else
      // follows PyTorch: a row of -inf, or with +inf or NaN, gives NaN.
      auto [m, s] = for_range(
          0, n_cols, BLOCK, std::tuple(full<f32, BLOCK>(-inf), zeros<f32, BLOCK>()),
          [&](I32 start, Tile<f32, BLOCK> m, Tile<f32, BLOCK> s) {
            auto c = start + cols;
            auto mask = c < n_cols;
            auto v = cast<f32>(load(x_row + c, mask, -inf));
            auto m_new = maximum(m, v);
            auto s_new = s * exp(m - m_new) + exp(v - m_new);
            return std::tuple(m_new, where(m_new == -inf, 0.0, s_new));
          });
      auto row_max = max(m);
      auto row_sum = sum(where(m == -inf, 0.0, s * exp(m - row_max)));
      auto inv = 1.0f / row_sum;
      for_range(0, n_cols, BLOCK, [&](I32 start) {
        auto c = start + cols;
        auto mask = c < n_cols;
        auto v = cast<f32>(load(x_row + c, mask));
        store(y_row + c, cast<T>(exp(v - row_max) * inv), mask);
      });
    }
  }
};

} // namespace kiln::ops
