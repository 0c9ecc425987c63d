//===- AxisInfo.h - contiguity of tiles along their last dimension (internal) ===//
#ifndef KILN_LOWERING_ANALYSIS_AXISINFO_H
#define KILN_LOWERING_ANALYSIS_AXISINFO_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace kiln {

/// Whether `op` computes its result element by element from its operands
/// (arith and math ops other than constants, kiln.select, kiln.cast): what
/// the analyses here and the layout passes (Layouts/) carry through.
bool isElementwise(mlir::Operation *op);

/// What is known of the tiles of a kernel along their last dimension, from
/// how they are computed: the stride between neighbouring elements (0: one
/// value along it, 1: consecutive integers or addresses one element apart),
/// and which masks hold for a prefix of every run along it (`i < n` with i
/// consecutive and n the same along it, and conjunctions of such with masks
/// uniform along it). A group of consecutive elements with stride 1 is one
/// vector access when its first address is aligned; under a prefix mask it
/// is whole when its last bit is set and touched at all when its first is.
class AxisInfo {
public:
  /// Analyses every value of `kernel`, in program order.
  explicit AxisInfo(mlir::func::FuncOp kernel);

  /// The stride of `v` along its last dimension, when it is 0 or 1.
  std::optional<int64_t> stride(mlir::Value v) const;
  /// Whether mask `v` holds for a prefix of every run along its last dimension.
  bool isPrefixMask(mlir::Value v) const { return prefix.contains(v); }

private:
  llvm::DenseMap<mlir::Value, int64_t> strides;
  llvm::DenseSet<mlir::Value> prefix;
  /// Tiles that hold one value for every element (see layouts::isUniform),
  /// classified once each, in program order.
  llvm::DenseSet<mlir::Value> uniform;

  bool isUniform(mlir::Value v) const {
    return !mlir::isa<mlir::RankedTensorType>(v.getType()) || uniform.contains(v);
  }

  void visit(mlir::Operation *op);
  void set(mlir::Value v, std::optional<int64_t> s);
  void inherit(mlir::Value dst, mlir::Value src);
  std::optional<int64_t> elementwise(mlir::Operation *op) const;
  void notePrefix(mlir::Operation *op);
};

} // namespace kiln

#endif // KILN_LOWERING_ANALYSIS_AXISINFO_H
