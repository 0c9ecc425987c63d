//===- layernorm.hpp - layer normalisation over rows ----------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/launch.hpp"

namespace kiln::ops {

/// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b, statistics in f32.
/// One program per row. ONE_PASS keeps the row in registers (n <= BLOCK);
/// otherwise the row is swept three times (mean, centred variance, output).
template <class T, int BLOCK, bool ONE_PASS = false> struct LayerNorm {
  /// Plain schedule, one stage, at least one element a thread.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BLOCK >= warps * 32;
  }
  void operator()(Ptr<T> x, Ptr<T> w, Ptr<T> b, Ptr<T> y, I32 n, I32 stride, F32 eps) const {
    detail::wait_for_previous_kernel();
    auto row = program_id(0);
    auto cols = arange<BLOCK>(); // (BLOCK)
    auto x_row = x + row * stride;
    auto y_row = y + row * stride;
    auto nf = cast<f32>(n);
    if constexpr (ONE_PASS) {
      auto mask = cols < n;
      auto v = cast<f32>(load(x_row + cols, mask, 0));
      auto mean = sum(v) / nf;
      auto d = where(mask, v - mean, 0.0f);
      auto rstd = rsqrt(sum(d * d) / nf + eps);
      auto wv = cast<f32>(load(w + cols, mask, 0));
      auto bv = cast<f32>(load(b + cols, mask, 0));
      store(y_row + cols, cast<T>(d * rstd * wv + bv), mask);
    } else {
      auto total = for_range(0, n, BLOCK, zeros<f32, BLOCK>(), [&](I32 start, Tile<f32, BLOCK> acc) {
        auto c = start + cols;
        return acc + cast<f32>(load(x_row + c, c < n, 0));
      });
      auto mean = sum(total) / nf;
      auto sq = for_range(0, n, BLOCK, zeros<f32, BLOCK>(), [&](I32 start, Tile<f32, BLOCK> acc) {
        auto c = start + cols;
        auto mask = c < n;
        auto d = where(mask, cast<f32>(load(x_row + c, mask, 0)) - mean, 0.0f);
        return acc + d * d;
      });
      auto rstd = rsqrt(sum(sq) / nf + eps);
      for_range(0, n, BLOCK, [&](I32 start) {
        auto c = start + cols;
        auto mask = c < n;
        auto v = cast<f32>(load(x_row + c, mask, 0));
        auto wv = cast<f32>(load(w + c, mask, 0));
        auto bv = cast<f32>(load(b + c, mask, 0));
        store(y_row + c, cast<T>((v - mean) * rstd * wv + bv), mask);
      });
    }
  }
};

/// Layer normalisation of rows of at most BLOCK elements, ROWS of them at a
/// time, with the schedule of SoftmaxRows: program p of G takes rows
/// [p * ROWS, (p + 1) * ROWS), then those G * ROWS further on, loading its
/// next rows before it reduces and writes the current ones; w and b are
/// loaded once a program, before it waits for the kernel launched before it
/// (programmatic dependent launch), which must therefore not write them.
/// Any grid is correct; as many programs as fit on the GPU at once is the
/// fast one. Same results as LayerNorm.
template <class T, int ROWS, int BLOCK> struct LayerNormRows {
  static constexpr int Rows = ROWS;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && ROWS * BLOCK >= warps * 32;
  }
  void operator()(Ptr<T> x, Ptr<T> w, Ptr<T> b, Ptr<T> y, I32 n_rows, I32 n, I32 stride, F32 eps) const {
    auto r = expand_dims<1>(arange<ROWS>());  // (ROWS, 1)
    auto c = expand_dims<0>(arange<BLOCK>()); // (1, BLOCK)
    auto in_row = c < n;
    auto nf = cast<f32>(n);
    auto wv = cast<f32>(load(w + c, in_row, 0));
    auto bv = cast<f32>(load(b + c, in_row, 0));
    auto step = num_programs(0) * ROWS;
    auto block = [&](I32 first) {
      auto rows = first + r;
      return load(x + rows * stride + c, (rows < n_rows) & in_row, 0);
    };
    detail::wait_for_previous_kernel();
    auto first = program_id(0) * ROWS;
    for_range(first, n_rows, step, block(first), [&](I32 at, Tile<T, ROWS, BLOCK> here) {
      auto next = block(at + step);
      auto v = cast<f32>(here);
      auto mean = expand_dims<1>(sum<1>(v)) / nf;
      auto d = where(in_row, v - mean, 0.0f);
      auto rstd = rsqrt(expand_dims<1>(sum<1>(d * d)) / nf + eps);
      auto rows = at + r;
      store(y + rows * stride + c, cast<T>(d * rstd * wv + bv), (rows < n_rows) & in_row);
      return next;
    });
  }
};

} // namespace kiln::ops
