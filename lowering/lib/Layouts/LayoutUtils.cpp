//===- LayoutUtils.cpp - what the layout passes share ----------------------===//
#include "LayoutUtils.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace kiln::layouts {

int64_t numWarpsOf(ModuleOp module) {
  auto attr = module->getAttrOfType<IntegerAttr>(kNumWarpsAttr);
  return attr ? attr.getInt() : 0;
}

Attribute defaultLayout(RankedTensorType type, int64_t warps, int64_t maxVec) {
  MLIRContext *ctx = type.getContext();
  int64_t threads = 32 * warps, numel = type.getNumElements();
  if (numel % threads != 0)
    return ReplicatedLayoutAttr::get(ctx, warps);
  int64_t perThread = numel / threads, last = type.getShape().back(), vec = 1;
  for (int64_t v = int64_t(llvm::bit_floor(uint64_t(std::max<int64_t>(maxVec, 1)))); v > 1; v /= 2)
    if (perThread % v == 0 && last % v == 0) {
      vec = v;
      break;
    }
  return BlockedLayoutAttr::get(ctx, vec, warps);
}

bool isTensorCoreLayout(Attribute layout) { return isa_and_nonnull<MmaLayoutAttr, SliceLayoutAttr>(layout); }

bool keepsSwizzled(RankedTensorType t) {
  if (t.getRank() != 2 || !t.getElementType().isIntOrFloat())
    return false;
  int64_t bits = t.getElementType().getIntOrFloatBitWidth(), cols = t.getShape().back();
  // 16-bit: rows of whole 128-byte panels (any number), or a power of two of
  // 16-byte chunks. 32-bit (TF32 products' operands): whole panels only.
  if (bits == 16)
    return cols % 64 == 0 || (cols % 8 == 0 && llvm::isPowerOf2_64(uint64_t(cols / 8)));
  return bits == 32 && t.getElementType().isF32() && cols % 32 == 0;
}

bool isUniform(Value v, int depth) {
  if (!isa<RankedTensorType>(v.getType()))
    return true;
  Operation *op = v.getDefiningOp();
  if (!op || depth > 16)
    return false;
  if (isa<SplatOp>(op))
    return true;
  DenseElementsAttr dense;
  if (matchPattern(op, m_Constant(&dense)))
    return dense.isSplat();
  if (isa<BroadcastOp, ExpandDimsOp, ReshapeOp, TransOp, ConvertLayoutOp, AddPtrOp>(op) || isElementwise(op))
    return llvm::all_of(op->getOperands(), [&](Value x) { return isUniform(x, depth + 1); });
  return false;
}

Value inLayout(OpBuilder &b, Value v, Attribute layout) {
  if (getLayout(v.getType()) == layout)
    return v;
  if (auto cvt = v.getDefiningOp<ConvertLayoutOp>(); cvt && getLayout(cvt.getSrc().getType()) == layout)
    return cvt.getSrc();
  return ConvertLayoutOp::create(b, v.getLoc(), withLayout(v.getType(), layout), v);
}

void retypeKeepingUsers(OpBuilder &b, Value v, Type newType) {
  Type old = v.getType();
  if (old == newType)
    return;
  v.setType(newType);
  if (v.use_empty())
    return;
  OpBuilder::InsertionGuard guard(b);
  if (auto arg = dyn_cast<BlockArgument>(v))
    b.setInsertionPointToStart(arg.getOwner());
  else
    b.setInsertionPointAfter(v.getDefiningOp());
  auto back = ConvertLayoutOp::create(b, v.getLoc(), old, v);
  v.replaceAllUsesExcept(back, back);
}

} // namespace kiln::layouts
