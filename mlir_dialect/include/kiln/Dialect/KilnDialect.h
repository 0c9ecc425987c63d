//===- KilnDialect.h - the kiln dialect -------------------------*- C++ -*-===//
//
// Declares the kiln dialect, its types, attributes and operations.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILNDIALECT_H
#define KILN_DIALECT_KILNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/TensorEncoding.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/KilnDialect.h.inc"
#include "kiln/Dialect/KilnEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/KilnTypes.h.inc"

#include "kiln/Dialect/KilnAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnAttrs.h.inc"

namespace kiln {
/// For `!kiln.ptr<T>` returns `T`; for `tensor<S x !kiln.ptr<T>>` returns
/// `tensor<S x T>`. Returns a null type for anything else.
mlir::Type getPointeeType(mlir::Type ptrLike);
/// `i1` for a scalar, `tensor<S x i1>` for a tile of shape S.
mlir::Type getMaskType(mlir::Type valueLike);
/// The element type of a tile, or the type itself for a scalar.
mlir::Type getElementTypeOrSelf(mlir::Type t);
/// The same shape and layout as `like` (scalar or tile) holding `elem`.
mlir::Type getSameShape(mlir::Type like, mlir::Type elem);
/// The GPU layout of a tile (its tensor encoding), or null: a scalar, or a
/// tile before the layout passes ran.
LayoutAttr getLayout(mlir::Type t);
/// `t` with layout `layout` (the type itself for a scalar).
mlir::Type withLayout(mlir::Type t, mlir::Attribute layout);
} // namespace kiln

namespace kiln::trait {
/// Fails, naming the type, when an operand or result of `op` is a tile with
/// a dynamic or zero extent.
mlir::LogicalResult verifyNonEmptyTiles(mlir::Operation *op);

/// Trait of every kiln op: its tiles have static, non-zero extents.
template <typename ConcreteType>
class NonEmptyTiles : public mlir::OpTrait::TraitBase<ConcreteType, NonEmptyTiles> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyNonEmptyTiles(op); }
};
} // namespace kiln::trait

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.h.inc"

namespace kiln {
/// The size of the clusters a kernel's programs run in: the `size` of its
/// kiln.cluster_reduce and kiln.cluster_gather ops (one size a kernel, as
/// their verifiers check), or 0 where it has none.
uint32_t clusterSizeOf(mlir::Operation *kernel);
} // namespace kiln

#endif // KILN_DIALECT_KILNDIALECT_H
