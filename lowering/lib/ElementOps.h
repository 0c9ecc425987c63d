//===- ElementOps.h - per-element helpers shared by the backends (internal) ===//
#ifndef KILN_LOWERING_ELEMENTOPS_H
#define KILN_LOWERING_ELEMENTOPS_H

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/IR/Builders.h"

namespace kiln {

/// Converts `x` (scalar or tile) to `dstType` with arith ops: float widths,
/// float <-> signed int, int widths (sign-extending), i1 as 0/1.
mlir::Value emitCast(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, mlir::Type dstType);
/// Loads an `elem` from integer address `addr` in `addrSpace`; where `mask`
/// (optional) is false nothing is read and the result is `fill` (zero if null).
mlir::Value emitMaskedLoad(mlir::OpBuilder &b, mlir::Location loc, mlir::Type elem, mlir::Value addr,
                           mlir::Value mask, mlir::Value fill, unsigned addrSpace);
/// Stores `value` at integer address `addr` in `addrSpace` unless `mask` (optional) is false.
void emitMaskedStore(mlir::OpBuilder &b, mlir::Location loc, mlir::Value addr, mlir::Value value,
                     mlir::Value mask, unsigned addrSpace);
/// The combining step of a reduction: add, maximum or minimum (NaN-propagating for floats).
mlir::Value emitCombine(mlir::OpBuilder &b, mlir::Location loc, ReduceKind kind, mlir::Value x,
                        mlir::Value y);

} // namespace kiln

#endif // KILN_LOWERING_ELEMENTOPS_H
