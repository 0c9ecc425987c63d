//===- epilogue.hpp - what a product adds after its accumulation ----------===//
#pragma once

namespace kiln::ops {

/// What a linear product adds after its accumulation: nothing, a bias, a
/// bias then gelu, or a bias and a residual. The kernels that fuse an
/// epilogue (decode-step, few-row and split-K products) take it as a value
/// fixed at trace time; kiln::nn's blocks use the same enum.
enum class Epilogue { None, Bias, BiasGelu, BiasResidual };

inline const char *epilogue_name(Epilogue e) {
  switch (e) {
  case Epilogue::None: return "none";
  case Epilogue::Bias: return "bias";
  case Epilogue::BiasGelu: return "bias_gelu";
  case Epilogue::BiasResidual: return "bias_residual";
  }
  return "?";
}

} // namespace kiln::ops
