//===- elementwise.hpp - element-wise kernels -----------------------------===//
#pragma once

#include "kiln/kiln.hpp"

namespace kiln::ops {

/// out[i] = x[i] + y[i] for i < n. Grid: ceil_div(n, BLOCK).
template <class T, int BLOCK_> struct VecAdd {
  static constexpr int BLOCK = BLOCK_;
  void operator()(Ptr<T> x, Ptr<T> y, Ptr<T> out, I32 n) const {
    auto offs = program_id(0) * BLOCK + arange<BLOCK>(); // (BLOCK)
    auto mask = offs < n;
    store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
  }
};

/// GPT-2's tanh approximation of GELU, evaluated in f32.
template <bool Approx = false, class T, int... D> Tile<T, D...> gelu_tanh(Tile<T, D...> x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  auto inner = (x + x * x * x * 0.044715) * kSqrt2OverPi;
  if constexpr (Approx)
    return x * 0.5 * (tanh_approx(inner) + 1.0);
  else
    return x * 0.5 * (tanh(inner) + 1.0);
}
/// Whether an epilogue storing `T` may use tanh_approx: its error is below
/// the rounding of a 16-bit result.
template <class T> inline constexpr bool kApproxFor = !std::is_same_v<T, f32> && !std::is_same_v<T, f64>;

} // namespace kiln::ops
