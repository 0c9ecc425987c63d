//===- LayoutUtils.h - what the layout passes share (internal) -----------===//
#ifndef KILN_LOWERING_LAYOUTS_LAYOUTUTILS_H
#define KILN_LOWERING_LAYOUTS_LAYOUTUTILS_H

#include "../Analysis/AxisInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kiln::layouts {

/// Module attribute recording the warps per CTA the layouts were chosen for.
inline constexpr const char *kNumWarpsAttr = "kiln.num_warps";

/// The warps recorded by kiln-coalesce, or 0 when the layout passes have not run.
int64_t numWarpsOf(mlir::ModuleOp module);

/// The layout kiln-coalesce gives a tile: #kiln.blocked when its elements
/// divide among the threads (groups of up to `maxVec` consecutive elements
/// of one row, a function of the shape only, so that tiles of one shape
/// share a layout whatever their element type), #kiln.replicated otherwise.
mlir::Attribute defaultLayout(mlir::RankedTensorType type, int64_t warps, int64_t maxVec = 8);

/// Tensor-core register layouts (#kiln.mma and its row slices): what the
/// passes propagate from products to the values computed from them.
bool isTensorCoreLayout(mlir::Attribute layout);

/// Whether a 2-D tile of `type` is kept XOR-swizzled in shared memory (16-bit
/// elements, rows of a power of two of 16-byte chunks, as ldmatrix wants; f32
/// elements in rows of whole 128-byte panels, as TF32 wgmma wants).
bool keepsSwizzled(mlir::RankedTensorType type);

/// Whether `v` holds one value for every element: a splat, a splat
/// constant, or shape, pointer and element-wise ops of such values and
/// scalars.
bool isUniform(mlir::Value v, int depth = 0);

/// (Analysis/AxisInfo.h) Whether `op` computes element by element.
using kiln::isElementwise;

/// `v` in `layout`: `v` itself, the source of the conversion that made `v`,
/// or a new kiln.convert_layout before `user`.
mlir::Value inLayout(mlir::OpBuilder &b, mlir::Value v, mlir::Attribute layout);

/// Gives `v` the type `newType` and keeps its users as they were: they get
/// a conversion back to the old type.
void retypeKeepingUsers(mlir::OpBuilder &b, mlir::Value v, mlir::Type newType);

} // namespace kiln::layouts

#endif // KILN_LOWERING_LAYOUTS_LAYOUTUTILS_H
