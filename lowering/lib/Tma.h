//===- Tma.h - 2-D blocks of kernel-argument tensors, for TMA copies -------===//
//
// The Tensor Memory Accelerator copies boxes of a tensor that a tensor map
// (built on the host from the kernel's arguments) describes. A tile access
// qualifies when its addresses and mask are those of a block of a row-major
// tensor whose base, row stride and extents are kernel arguments:
//
//   base[(r0 + i) * stride + c0 + j]  masked by  (r0 + i < rows) & (c0 + j < cols)
//
// kiln-pipeline-loads copies such loads into its rings, kiln-tma-stores
// writes such stores out of shared memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace kiln::tma {

/// A scalar `value + offset` (value may be null: the constant alone).
struct Start {
  mlir::Value value;
  int64_t offset = 0;
  bool operator==(const Start &o) const { return value == o.value && offset == o.offset; }
};

/// A block of a row-major tensor: the kernel arguments describing the
/// tensor, and the block's first row and column.
struct Block {
  mlir::BlockArgument base, rows, cols, stride;
  Start row, col;
};

/// The block `ptr` (a 2-D tile of pointers shaped `tile`) addresses under
/// `mask`, when TMA can copy it: whole 128-byte swizzle panels of 16-bit or
/// f32 elements, at most 256 rows, masked by the tensor's extents, and
/// filled (for loads, `other`) with zeros or nothing.
std::optional<Block> matchTmaBlock(mlir::Value ptr, mlir::Value mask, mlir::Value other,
                                   mlir::RankedTensorType tile);

/// Appends to `func` the tensor-map argument of `block`'s tensor, with what
/// the runtime needs to encode it (kernel argument numbers, and the box: the
/// tile's rows by one 128-byte-wide panel). Null if the argument cannot be
/// added.
mlir::Value addTensorMap(mlir::func::FuncOp func, const Block &block, mlir::RankedTensorType tile,
                         mlir::Location loc);

/// The i32 value of `s`, its value looked up in `map` when given.
mlir::Value materialize(mlir::OpBuilder &b, mlir::Location loc, const Start &s,
                        const mlir::IRMapping *map = nullptr);

} // namespace kiln::tma
