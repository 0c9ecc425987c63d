//===- param.hpp - a kernel parameter: a scalar or a pointer --------------===//
#pragma once

#include "kiln/core/dtype.hpp"

#include <string>

namespace kiln {

/// A parameter of a kernel: a scalar of `dtype`, or a pointer to `dtype`
/// elements. The tracer records them, the compiler keeps them with the
/// kernel, and every launch is checked against them.
struct Param {
  DType dtype;
  bool is_pointer;
  /// "f32", "ptr<f16>", ...
  std::string describe() const;
};

} // namespace kiln
