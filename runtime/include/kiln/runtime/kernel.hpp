//===- kernel.hpp - compiled kernels, targets, grids and launch arguments -===//
//
// The runtime face of kiln, free of MLIR headers: a `CompiledKernel` holds the
// IR of every compilation stage and an executable for its target, and checks
// every launch (argument count, kinds, dtypes, null pointers, grid).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/param.hpp"
#include "kiln/core/target.hpp"
#include "kiln/core/traced_module.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

/// Grid of programs; every axis at least 1.
struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  Grid(uint32_t x = 1, uint32_t y = 1, uint32_t z = 1) : x(x), y(y), z(z) {}
};

/// One launch argument, type-erased.
struct KernelArg {
  enum class Kind { Pointer, Int, Float };
  Kind kind;
  DType dtype;      ///< pointee dtype for pointers (or Ptr when untyped), value dtype otherwise
  const void *ptr = nullptr;
  int64_t i = 0;
  double f = 0;

  template <class T> static KernelArg pointer(const T *p) {
    return {Kind::Pointer, host_dtype<T>(), p, 0, 0};
  }
  static KernelArg untyped_pointer(const void *p) { return {Kind::Pointer, DType::Ptr, p, 0, 0}; }
  static KernelArg integer(int64_t v, DType t = DType::I32) { return {Kind::Int, t, nullptr, v, 0}; }
  static KernelArg floating(double v, DType t = DType::F32) { return {Kind::Float, t, nullptr, 0, v}; }

  template <class T> static constexpr DType host_dtype() {
    if constexpr (std::is_same_v<T, float>) return DType::F32;
    else if constexpr (std::is_same_v<T, double>) return DType::F64;
    else if constexpr (std::is_same_v<T, half>) return DType::F16;
    else if constexpr (std::is_same_v<T, bfloat16>) return DType::BF16;
    else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
    else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
    else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
    else if constexpr (std::is_same_v<T, bool>) return DType::I1;
    else return DType::Ptr;
  }
};

/// A kernel compiled for one target: its IR at every stage and an executable.
class CompiledKernel {
public:
  CompiledKernel(TracedModulePtr traced, const Target &target,
                 const CompileOptions &options = {});
  /// Virtual: a typed Kernel<K> (which also holds its kernel object) may be
  /// owned and deleted through a CompiledKernel pointer (tuning candidates).
  virtual ~CompiledKernel();
  CompiledKernel(CompiledKernel &&) noexcept;
  CompiledKernel &operator=(CompiledKernel &&) noexcept;

  const std::string &name() const;
  const Target &target() const;
  std::span<const Param> params() const;
  /// The IR of a stage; throws Error if the stage does not exist for this target.
  const std::string &ir(Stage stage) const;
  /// Seconds spent compiling (tracing excluded).
  double compile_seconds() const;
  /// True when the compiled stages came from the on-disk kernel cache.
  bool from_cache() const;

  /// Launch with type-erased arguments; every mismatch throws Error.
  void launch(const Grid &grid, std::span<const KernelArg> args) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln
