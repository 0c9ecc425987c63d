//===- KilnOps.cpp - kiln op verifiers and folders ------------------------===//
#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.cpp.inc"

LogicalResult kiln::trait::verifyNonEmptyTiles(Operation *op) {
  auto check = [&](Type t, StringRef what, unsigned i) -> LogicalResult {
    auto tile = dyn_cast<RankedTensorType>(t);
    if (!tile || llvm::all_of(tile.getShape(), [](int64_t d) { return d > 0; }))
      return success();
    return op->emitOpError() << what << " #" << i << " is a tile of type " << t
                             << "; every dimension of a tile must be static and non-zero";
  };
  for (auto [i, t] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(t, "operand", unsigned(i))))
      return failure();
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(t, "result", unsigned(i))))
      return failure();
  return success();
}

namespace {
int64_t rankOf(Type t) {
  if (auto tile = dyn_cast<RankedTensorType>(t))
    return tile.getRank();
  return 0;
}
ArrayRef<int64_t> shapeOf(Type t) {
  if (auto tile = dyn_cast<RankedTensorType>(t))
    return tile.getShape();
  return {};
}
/// The same scalar type, or tiles of one shape and element type whatever
/// their layouts.
bool sameIgnoringLayout(Type a, Type b) {
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  if (!ta || !tb)
    return a == b;
  return ta.getShape() == tb.getShape() && ta.getElementType() == tb.getElementType();
}
} // namespace

//===----------------------------------------------------------------------===//
// MakeRangeOp
//===----------------------------------------------------------------------===//

LogicalResult MakeRangeOp::verify() {
  int64_t start = getStart(), end = getEnd();
  auto type = getType();
  if (type.getRank() != 1)
    return emitOpError("result must be a 1-D tile, got ") << type;
  if (end <= start)
    return emitOpError("end (") << end << ") must be greater than start (" << start << ")";
  if (type.getDimSize(0) != end - start)
    return emitOpError("result length ") << type.getDimSize(0) << " != end - start ("
                                         << end - start << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// SplatOp
//===----------------------------------------------------------------------===//

OpFoldResult SplatOp::fold(FoldAdaptor adaptor) {
  auto value = adaptor.getSrc();
  if (!value || !isa<IntegerAttr, FloatAttr>(value))
    return {};
  return SplatElementsAttr::get(cast<ShapedType>(getType()), value);
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  if (src.getElementType() != dst.getElementType())
    return emitOpError("element type changes from ") << src.getElementType() << " to "
                                                     << dst.getElementType();
  if (src.getRank() != dst.getRank())
    return emitOpError("rank changes from ") << src.getRank() << " to " << dst.getRank()
                                             << "; use kiln.expand_dims first";
  for (int64_t i = 0; i < src.getRank(); ++i) {
    int64_t s = src.getDimSize(i), d = dst.getDimSize(i);
    if (s != d && s != 1)
      return emitOpError("dimension ") << i << " of size " << s << " cannot broadcast to " << d;
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

//===----------------------------------------------------------------------===//
// ExpandDimsOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandDimsOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  int64_t axis = getAxis();
  if (axis < 0 || axis > src.getRank())
    return emitOpError("axis ") << axis << " out of range [0, " << src.getRank() << "]";
  SmallVector<int64_t> expected(src.getShape());
  expected.insert(expected.begin() + axis, 1);
  auto want = RankedTensorType::get(expected, src.getElementType());
  if (!sameIgnoringLayout(want, dst))
    return emitOpError("result type ") << dst << " != expected " << want;
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  if (src.getElementType() != dst.getElementType())
    return emitOpError("element type changes from ") << src.getElementType() << " to "
                                                     << dst.getElementType();
  if (src.getNumElements() != dst.getNumElements())
    return emitOpError("element count changes from ") << src.getNumElements() << " to "
                                                      << dst.getNumElements();
  return success();
}

LogicalResult TransOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  if (src.getRank() != 2)
    return emitOpError("expects a 2-D tile, got rank ") << src.getRank();
  if (src.getElementType() != dst.getElementType())
    return emitOpError("element type changes from ") << src.getElementType() << " to "
                                                     << dst.getElementType();
  if (dst.getRank() != 2 || dst.getDimSize(0) != src.getDimSize(1) ||
      dst.getDimSize(1) != src.getDimSize(0))
    return emitOpError("result ") << dst << " is not the transpose of " << src;
  return success();
}

OpFoldResult TransOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getSrc().getDefiningOp<TransOp>())
    return inner.getSrc();
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

//===----------------------------------------------------------------------===//
// AddPtrOp
//===----------------------------------------------------------------------===//

LogicalResult AtomicAddOp::verify() {
  if (!getPointeeType(getPtr().getType()).isInteger(32))
    return emitOpError("needs a pointer to i32, got ") << getPtr().getType();
  return success();
}

LogicalResult AtomicAccumulateOp::verify() {
  if (!mlir::getElementTypeOrSelf(getPointeeType(getPtr().getType())).isF32())
    return emitOpError("needs pointers to f32, got ") << getPtr().getType();
  return success();
}

LogicalResult AddPtrOp::verify() {
  Type ptr = getPtr().getType(), off = getOffset().getType();
  if (rankOf(ptr) != rankOf(off) || shapeOf(ptr) != shapeOf(off))
    return emitOpError("offset type ") << off << " does not have the shape of pointer type "
                                       << ptr;
  return success();
}

OpFoldResult AddPtrOp::fold(FoldAdaptor adaptor) {
  if (matchPattern(adaptor.getOffset(), m_Zero()) ||
      (adaptor.getOffset() && isa<SplatElementsAttr>(adaptor.getOffset()) &&
       cast<SplatElementsAttr>(adaptor.getOffset()).getSplatValue<APInt>().isZero()))
    return getPtr();
  return {};
}

//===----------------------------------------------------------------------===//
// LoadOp
//===----------------------------------------------------------------------===//

LogicalResult LoadOp::verify() {
  if (getOther() && !getMask())
    return emitOpError("a fill value needs a mask");
  return success();
}

//===----------------------------------------------------------------------===//
// DotOp
//===----------------------------------------------------------------------===//

LogicalResult AsyncCopyOp::verify() {
  auto ring = cast<SharedType>(getRing().getType());
  if (!sameIgnoringLayout(getPointeeType(getPtr().getType()), ring.getTileType()))
    return emitOpError("copies ") << getPointeeType(getPtr().getType())
                                  << " into a ring of " << ring.getTileType();
  return success();
}

namespace {
/// addf(x, dot(a, b, 0)) -> dot(a, b, x), when the product has no other use:
/// the product accumulates onto x instead of being added to it afterwards
/// (attention's acc * alpha + P V), which saves the zeroed accumulator and
/// one add per element.
struct AccumulateIntoDot : OpRewritePattern<arith::AddFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::AddFOp add, PatternRewriter &rewriter) const override {
    for (auto [x, y] : {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      auto dot = y.getDefiningOp<DotOp>();
      if (!dot || dot.getAsync() || !dot->hasOneUse() || x.getType() != dot.getType() ||
          !matchPattern(dot.getAcc(), m_AnyZeroFloat()))
        continue;
      if (dot->getBlock() != add->getBlock())
        continue;
      // x is defined before the add: when after the product, the product
      // moves down to the add (its operands are defined before it already),
      // unless something in between has memory effects (a copy into the
      // shared memory a product reads in place).
      if (Operation *def = x.getDefiningOp(); def && def->getBlock() == dot->getBlock() && dot->isBeforeInBlock(def)) {
        bool pure = true;
        for (Operation *op = dot->getNextNode(); op != add.getOperation(); op = op->getNextNode())
          pure &= isMemoryEffectFree(op);
        if (!pure)
          continue;
        rewriter.moveOpBefore(dot, add);
      }
      rewriter.modifyOpInPlace(dot, [&] { dot.getAccMutable().assign(x); });
      rewriter.replaceOp(add, dot.getResult());
      return success();
    }
    return failure();
  }
};
} // namespace

void DotOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<AccumulateIntoDot>(context);
}

LogicalResult DotOp::verify() {
  auto a = getA().getType(), b = getB().getType(), acc = getAcc().getType();
  if (a.getRank() != 2 || b.getRank() != 2 || acc.getRank() != 2)
    return emitOpError("operands must be 2-D tiles");
  if (a.getElementType() != b.getElementType())
    return emitOpError("lhs element type ") << a.getElementType() << " != rhs element type "
                                            << b.getElementType();
  if (!a.getElementType().isF16() && !a.getElementType().isBF16() &&
      !a.getElementType().isF32())
    return emitOpError("operands must be f16, bf16 or f32, got ") << a.getElementType();
  if (!acc.getElementType().isF32())
    return emitOpError("accumulator must be f32, got ") << acc.getElementType();
  if (getTf32() && !a.getElementType().isF32())
    return emitOpError("tf32 applies to f32 operands, got ") << a.getElementType();
  if (a.getDimSize(1) != b.getDimSize(0))
    return emitOpError("K of lhs (") << a.getDimSize(1) << ") != K of rhs (" << b.getDimSize(0)
                                     << ")";
  if (acc.getDimSize(0) != a.getDimSize(0) || acc.getDimSize(1) != b.getDimSize(1))
    return emitOpError("accumulator shape ") << acc << " != " << a.getDimSize(0) << "x"
                                             << b.getDimSize(1);
  if (getAsync())
    for (Operation *user : getResult().getUsers()) {
      auto dot = dyn_cast<DotOp>(user);
      if (!isa<DotWaitOp>(user) && !user->hasTrait<OpTrait::IsTerminator>() &&
          !(dot && dot.getAsync() && dot.getAcc() == getResult()))
        return emitOpError("the result of an async product is read by ")
               << user->getName() << "; only a kiln.dot_wait, a yield or the next async product may";
    }
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp / ArgMaxOp
//===----------------------------------------------------------------------===//

static LogicalResult verifyReduction(Operation *op, RankedTensorType src, int64_t axis,
                                     Type result, Type resultElem) {
  if (axis < 0 || axis >= src.getRank())
    return op->emitOpError("axis ") << axis << " out of range for a rank-" << src.getRank()
                                    << " tile";
  SmallVector<int64_t> shape(src.getShape());
  shape.erase(shape.begin() + axis);
  Type want = shape.empty() ? resultElem : Type(RankedTensorType::get(shape, resultElem));
  if (!sameIgnoringLayout(want, result))
    return op->emitOpError("result type ") << result << " != expected " << want;
  return success();
}

LogicalResult ReduceOp::verify() {
  auto src = getSrc().getType();
  return verifyReduction(*this, src, getAxis(), getType(), src.getElementType());
}

uint32_t kiln::clusterSizeOf(Operation *kernel) {
  uint32_t size = 0;
  kernel->walk([&](Operation *op) {
    if (auto r = dyn_cast<ClusterReduceOp>(op))
      size = r.getSize();
    else if (auto g = dyn_cast<ClusterGatherOp>(op))
      size = g.getSize();
    else
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return size;
}

// One kernel, one cluster shape: every cluster op of the enclosing function
// names the size of its first.
static LogicalResult verifyClusterSize(Operation *op, uint32_t size) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return success();
  uint32_t first = clusterSizeOf(func);
  if (size != first)
    return op->emitOpError("cluster size ")
           << size << " differs from another cluster op of the same kernel (" << first << ")";
  return success();
}

LogicalResult ClusterReduceOp::verify() { return verifyClusterSize(*this, getSize()); }

LogicalResult ClusterGatherOp::verify() {
  if (getValues().empty())
    return emitOpError("gathers at least one value");
  if (getValues().size() != getResults().size())
    return emitOpError("has ") << getValues().size() << " values but " << getResults().size() << " results";
  for (auto [v, r] : llvm::zip(getValues(), getResults())) {
    SmallVector<int64_t> shape{int64_t(getSize())};
    if (auto tile = dyn_cast<RankedTensorType>(v.getType())) {
      if (tile.getRank() != 1)
        return emitOpError("gathers scalars and 1-D tiles, not ") << tile;
      shape.push_back(tile.getDimSize(0));
    }
    Type want = RankedTensorType::get(shape, Float32Type::get(getContext()));
    if (!sameIgnoringLayout(want, r.getType()))
      return emitOpError("result type ") << r.getType() << " != expected " << want;
  }
  return verifyClusterSize(*this, getSize());
}

LogicalResult ArgMaxOp::verify() {
  auto src = getSrc().getType();
  return verifyReduction(*this, src, getAxis(), getType(),
                         IntegerType::get(getContext(), 32));
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  Type src = getSrc().getType(), dst = getType();
  if (rankOf(src) != rankOf(dst) || shapeOf(src) != shapeOf(dst))
    return emitOpError("shape changes from ") << src << " to " << dst;
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  return {};
}

LogicalResult LocalLoadOp::verify() {
  auto ring = cast<SharedType>(getRing().getType());
  if (!sameIgnoringLayout(getType(), ring.getTileType()))
    return emitOpError("reads ") << getType() << " from a ring of " << ring.getTileType();
  return success();
}

//===----------------------------------------------------------------------===//
// Barriers and TMA copies
//===----------------------------------------------------------------------===//

namespace {
/// A ring of shared-memory barriers: `!kiln.shared<N x 1 x i64>`.
LogicalResult verifyBarriers(Operation *op, Type t) {
  auto ring = cast<SharedType>(t);
  if (ring.getShape().size() != 1 || ring.getShape()[0] != 1 || !ring.getElementType().isInteger(64))
    return op->emitOpError("expects a ring of barriers (!kiln.shared<N x 1 x i64>), got ") << t;
  return success();
}
} // namespace

LogicalResult MBarrierInitOp::verify() { return verifyBarriers(*this, getBarriers().getType()); }
LogicalResult MBarrierArriveOp::verify() { return verifyBarriers(*this, getBarriers().getType()); }
LogicalResult MBarrierWaitOp::verify() { return verifyBarriers(*this, getBarriers().getType()); }

LogicalResult ProducerOp::verify() {
  Operation *parent = (*this)->getParentOp();
  if (!parent || !parent->hasAttr(KilnDialect::getKernelAttrName()))
    return emitOpError("must be at the top level of a kernel");
  WalkResult tiles = getBody().walk([&](Operation *op) {
    auto isTile = [](Type t) { return isa<RankedTensorType>(t); };
    if (llvm::any_of(op->getOperandTypes(), isTile) || llvm::any_of(op->getResultTypes(), isTile)) {
      op->emitOpError("in a kiln.producer works on tiles; its warps hold scalars only");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(tiles.wasInterrupted());
}

LogicalResult AsyncTmaCopyOp::verify() {
  if (failed(verifyBarriers(*this, getBarriers().getType())))
    return failure();
  RankedTensorType tile = cast<SharedType>(getRing().getType()).getTileType();
  // Whole 128-byte swizzle panels: 64 16-bit or 32 f32 elements per panel.
  unsigned bits = tile.getElementType().getIntOrFloatBitWidth();
  if (tile.getRank() != 2 || (bits != 16 && !tile.getElementType().isF32()) ||
      tile.getDimSize(1) % (1024 / bits) != 0 || tile.getDimSize(0) > 256 || tile.getDimSize(0) % 8 != 0)
    return emitOpError("copies 2-D tiles of 16-bit or f32 elements whose rows are a multiple of 128 "
                       "bytes, with at most 256 rows (a multiple of 8), got ")
           << tile;
  return success();
}

LogicalResult TmaStoreOp::verify() {
  auto tile = cast<RankedTensorType>(getValue().getType());
  Type elem = tile.getElementType();
  unsigned bits = elem.getIntOrFloatBitWidth();
  if (tile.getRank() != 2 || !(elem.isF16() || elem.isBF16() || elem.isF32()) ||
      tile.getDimSize(1) % (1024 / bits) != 0 || tile.getDimSize(0) > 256 || tile.getDimSize(0) % 8 != 0)
    return emitOpError("stores 2-D tiles of f16, bf16 or f32 elements whose rows are a multiple of 128 "
                       "bytes, with at most 256 rows (a multiple of 8), got ")
           << tile;
  return success();
}

//===----------------------------------------------------------------------===//
// ConvertLayoutOp
//===----------------------------------------------------------------------===//

LogicalResult ConvertLayoutOp::verify() {
  if (!getLayout(getSrc().getType()) || !getLayout(getType()))
    return emitOpError("converts between GPU layouts: both types need a layout encoding, got ")
           << getSrc().getType() << " -> " << getType();
  return success();
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  // convert(convert(x)) back to x's layout is x.
  if (auto inner = getSrc().getDefiningOp<ConvertLayoutOp>(); inner && inner.getSrc().getType() == getType())
    return inner.getSrc();
  return {};
}

LogicalResult ConvertLayoutOp::canonicalize(ConvertLayoutOp op, PatternRewriter &rewriter) {
  Operation *def = op.getSrc().getDefiningOp();
  if (!def)
    return failure();
  // convert(convert(x)) is one conversion from x.
  if (auto inner = dyn_cast<ConvertLayoutOp>(def)) {
    rewriter.replaceOpWithNewOp<ConvertLayoutOp>(op, op.getType(), inner.getSrc());
    return success();
  }
  // A splat is made in whatever layout its user wants.
  if (auto splat = dyn_cast<SplatOp>(def)) {
    rewriter.replaceOpWithNewOp<SplatOp>(op, op.getType(), splat.getSrc());
    return success();
  }
  DenseElementsAttr dense;
  if (matchPattern(def, m_Constant(&dense)) && dense.isSplat()) {
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, op.getType(),
                                                   dense.reshape(cast<ShapedType>(op.getType())));
    return success();
  }
  return failure();
}
