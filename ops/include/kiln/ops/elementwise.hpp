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
template <class T, int... D> Tile<T, D...> gelu_tanh(Tile<T, D...> x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  auto inner = (x + x * x * x * 0.044715) * kSqrt2OverPi;
  return x * 0.5 * (tanh(inner) + 1.0);
}

} // namespace kiln::ops
