//===- RemoveLayoutConversions.cpp - keep values in tensor-core layouts ---===//
//
// Carries #kiln.mma accumulators and their row slices forward through the
// ops that can work in them, and across loops, and computes rows broadcast
// into an accumulator (bias rows) in its column slice, so that conversions
// (trips through shared memory) are left only where a value really changes
// hands.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "LayoutUtils.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNREMOVELAYOUTCONVERSIONS
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::layouts;

namespace {

/// The tensor-core layout `v` is available in for free: its own, or its
/// source's if `v` was converted from one.
Attribute available(Value v) {
  Attribute l = kiln::getLayout(v.getType());
  if (isTensorCoreLayout(l))
    return l;
  if (auto cvt = v.getDefiningOp<kiln::ConvertLayoutOp>()) {
    Attribute src = kiln::getLayout(cvt.getSrc().getType());
    if (isTensorCoreLayout(src))
      return src;
  }
  return {};
}

/// (M) and (M, 1) tiles, which a row slice of an (M, N) accumulator holds.
bool holdsRows(RankedTensorType t, kiln::SliceLayoutAttr slice) {
  return succeeded(slice.verifyEncoding(t.getShape(), t.getElementType(), [] { return InFlightDiagnostic(); }));
}

class Propagation {
public:
  explicit Propagation(MLIRContext *ctx) : b(ctx) {}

  /// One walk in program order; returns whether anything changed.
  bool run(func::FuncOp f) {
    changed = false;
    f.walk([&](Operation *op) {
      if (op->getNumResults() != 1)
        return;
      auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!result || isTensorCoreLayout(kiln::getLayout(result)) || !kiln::getLayout(result))
        return;
      if (isElementwise(op))
        elementwise(op);
      else if (auto red = dyn_cast<kiln::ReduceOp>(op))
        reduceRows(red);
      else if (isa<kiln::ExpandDimsOp, kiln::ReshapeOp>(op))
        keepRows(op);
      else if (auto bc = dyn_cast<kiln::BroadcastOp>(op))
        broadcastRows(bc);
    });
    return changed;
  }

  /// Loop-carried tiles that the body yields in a tensor-core layout are
  /// carried in it.
  bool hoistAcrossLoops(func::FuncOp f) {
    bool hoisted = false;
    f.walk([&](scf::ForOp loop) {
      auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
      for (auto [i, y] : llvm::enumerate(yield.getOperands())) {
        Attribute l = available(y);
        BlockArgument arg = loop.getRegionIterArg(i);
        if (!l || kiln::getLayout(arg.getType()) == l || isUniform(y))
          continue;
        Type type = kiln::withLayout(arg.getType(), l);
        OpOperand &init = loop.getInitsMutable()[i];
        b.setInsertionPoint(loop);
        init.assign(inLayout(b, init.get(), l));
        b.setInsertionPoint(yield);
        yield->setOperand(i, inLayout(b, y, l));
        retypeKeepingUsers(b, arg, type);
        retypeKeepingUsers(b, loop.getResult(i), type);
        hoisted = true;
      }
    });
    return hoisted;
  }

private:
  OpBuilder b;
  bool changed = false;

  void retype(Operation *op, Attribute layout) {
    retypeKeepingUsers(b, op->getResult(0), kiln::withLayout(op->getResult(0).getType(), layout));
    changed = true;
  }

  /// In the first operand's accumulator layout, else the first's row slice.
  void elementwise(Operation *op) {
    if (isUniform(op->getResult(0)))
      return;
    Attribute chosen;
    for (Value v : op->getOperands())
      if (isa_and_nonnull<kiln::MmaLayoutAttr>(available(v))) {
        chosen = available(v);
        break;
      }
    if (!chosen)
      for (Value v : op->getOperands())
        if (isa_and_nonnull<kiln::SliceLayoutAttr>(available(v))) {
          chosen = available(v);
          break;
        }
    if (!chosen)
      return;
    b.setInsertionPoint(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isa<RankedTensorType>(operand.get().getType()))
        operand.assign(inLayout(b, operand.get(), chosen));
    retype(op, chosen);
  }

  /// Along the rows of an accumulator: a row slice of it.
  void reduceRows(kiln::ReduceOp red) {
    auto mma = dyn_cast_or_null<kiln::MmaLayoutAttr>(available(red.getSrc()));
    Type elem = red.getSrc().getType().getElementType();
    if (!mma || red.getAxis() != 1 || isUniform(red.getSrc()) ||
        !(elem.isF32() || elem.isF16() || elem.isBF16() || elem.isInteger(32)))
      return;
    b.setInsertionPoint(red);
    red.getSrcMutable().assign(inLayout(b, red.getSrc(), mma));
    retype(red, kiln::SliceLayoutAttr::get(red.getContext(), 1, mma));
  }

  /// (M) <-> (M, 1) of a row slice: the same rows.
  void keepRows(Operation *op) {
    auto slice = dyn_cast_or_null<kiln::SliceLayoutAttr>(available(op->getOperand(0)));
    if (!slice || !holdsRows(cast<RankedTensorType>(op->getResult(0).getType()), slice))
      return;
    b.setInsertionPoint(op);
    op->setOperand(0, inLayout(b, op->getOperand(0), slice));
    retype(op, slice);
  }

  /// A row slice along the rows: the accumulator layout, nothing moves.
  void broadcastRows(kiln::BroadcastOp bc) {
    auto slice = dyn_cast_or_null<kiln::SliceLayoutAttr>(available(bc.getSrc()));
    if (!slice || isUniform(bc.getSrc()))
      return;
    auto mma = cast<kiln::MmaLayoutAttr>(slice.getParent());
    auto dst = bc.getType();
    if (dst.getRank() != 2 || dst.getDimSize(1) % (8 * mma.getWarpsN()) != 0)
      return;
    b.setInsertionPoint(bc);
    bc.getSrcMutable().assign(inLayout(b, bc.getSrc(), slice));
    retype(bc, mma);
  }
};

/// The A operand of a 16-bit product, converted to shared memory from an
/// accumulator whose warps hold the same whole rows, is already in its
/// registers (TF32 fragments hold other elements than the accumulator's).
void operandsFromRegisters(func::FuncOp f) {
  f.walk([&](kiln::DotOp dot) {
    auto mma = dyn_cast<kiln::MmaLayoutAttr>(kiln::getLayout(dot.getType()));
    auto cvt = dot.getA().getDefiningOp<kiln::ConvertLayoutOp>();
    if (!mma || !cvt || mma.getWarpsN() != 1 || isUniform(cvt.getSrc()) ||
        dot.getA().getType().getElementType().isF32())
      return;
    auto from = dyn_cast<kiln::MmaLayoutAttr>(kiln::getLayout(cvt.getSrc().getType()));
    if (!from || from.getWarpsN() != 1 || from.getWarpsM() != mma.getWarpsM())
      return;
    OpBuilder b(dot);
    auto operand = kiln::DotOperandLayoutAttr::get(dot.getContext(), 0, mma);
    dot.getAMutable().assign(kiln::ConvertLayoutOp::create(
        b, dot.getLoc(), kiln::withLayout(dot.getA().getType(), operand), cvt.getSrc()));
  });
}

/// Whether `v` is computed from ranges, splats and integer or pointer
/// arithmetic alone (what the GPU lowering recomputes at any element).
bool isIndexArithmetic(Value v, int depth = 0) {
  if (!isa<RankedTensorType>(v.getType()))
    return true;
  Operation *op = v.getDefiningOp();
  if (!op || depth > 16)
    return false;
  if (isa<kiln::MakeRangeOp, kiln::SplatOp>(op))
    return true;
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return isa<SplatElementsAttr>(c.getValue());
  bool integers = isa<arith::ArithDialect>(op->getDialect()) && op->getNumResults() == 1 &&
                  isa<IntegerType>(kiln::getElementTypeOrSelf(op->getResult(0).getType()));
  if (!integers && !isa<kiln::AddPtrOp, kiln::BroadcastOp, kiln::ExpandDimsOp>(op))
    return false;
  return llvm::all_of(op->getOperands(), [&](Value operand) { return isIndexArithmetic(operand, depth + 1); });
}

/// Rebuilds the ops computing a (1, N) or (N) tile in column slice `slice`
/// of an accumulator layout: ranges, splats, splat constants, element-wise
/// ops, pointer offsets and loads (a bias row). `exclusive` says whether
/// `v` feeds the broadcast being rewritten and nothing else, up to it: a
/// load is moved only then (it is never loaded twice). Returns null when
/// some op cannot be held in a slice.
class ColumnSlice {
public:
  ColumnSlice(OpBuilder &b, kiln::SliceLayoutAttr slice) : b(b), slice(slice) {}

  Value rebuild(Value v, bool exclusive, int depth = 0) {
    auto tile = dyn_cast<RankedTensorType>(v.getType());
    if (!tile)
      return v; // scalars stay as they are
    if (Value done = rebuilt.lookup(v))
      return done;
    Operation *op = v.getDefiningOp();
    Type type = kiln::withLayout(tile, slice);
    if (!op || depth > 16 || op->getNumResults() != 1 ||
        failed(slice.verifyEncoding(tile.getShape(), tile.getElementType(), [] { return InFlightDiagnostic(); })))
      return {};
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense || !dense.isSplat())
        return {};
      b.setInsertionPoint(op);
      return rebuilt[v] = arith::ConstantOp::create(b, op->getLoc(), cast<TypedAttr>(dense.reshape(cast<ShapedType>(type))));
    }
    bool movable = isa<kiln::MakeRangeOp, kiln::SplatOp, kiln::AddPtrOp>(op) || isElementwise(op) ||
                   (isa<kiln::ExpandDimsOp>(op) && cast<kiln::ExpandDimsOp>(op).getAxis() == 0) ||
                   (isa<kiln::LoadOp>(op) && exclusive);
    if (!movable)
      return {};
    IRMapping map;
    for (Value operand : op->getOperands()) {
      Value in = rebuild(operand, exclusive && operand.hasOneUse(), depth + 1);
      if (!in)
        return {};
      map.map(operand, in);
    }
    b.setInsertionPoint(op);
    Operation *copy = b.clone(*op, map);
    copy->getResult(0).setType(type);
    return rebuilt[v] = copy->getResult(0);
  }

private:
  OpBuilder &b;
  kiln::SliceLayoutAttr slice;
  DenseMap<Value, Value> rebuilt;
};

/// A row broadcast into an accumulator layout, (1, N) -> (M, N) (a bias row
/// added to a product), is computed in a column slice of that layout: each
/// thread loads and converts the 2 columns per 8-column tile its accumulator
/// elements lie in, instead of every thread the whole row and a trip through
/// shared memory to regroup it.
void columnsFromBroadcasts(func::FuncOp f) {
  SmallVector<kiln::ConvertLayoutOp> converts;
  f.walk([&](kiln::ConvertLayoutOp cvt) { converts.push_back(cvt); });
  for (kiln::ConvertLayoutOp cvt : converts) {
    auto mma = dyn_cast<kiln::MmaLayoutAttr>(kiln::getLayout(cvt.getType()));
    auto bc = cvt.getSrc().getDefiningOp<kiln::BroadcastOp>();
    if (!mma || !bc || isUniform(bc.getSrc()))
      continue;
    auto src = bc.getSrc().getType();
    if (src.getRank() != 2 || src.getDimSize(0) != 1)
      continue;
    OpBuilder b(cvt);
    auto slice = kiln::SliceLayoutAttr::get(cvt.getContext(), 0, mma);
    ColumnSlice columns(b, slice);
    Value row = columns.rebuild(bc.getSrc(), bc->hasOneUse() && bc.getSrc().hasOneUse());
    if (!row)
      continue;
    b.setInsertionPoint(cvt);
    Value wide = kiln::BroadcastOp::create(b, cvt.getLoc(), cvt.getType(), row);
    cvt.replaceAllUsesWith(wide);
    cvt.erase();
  }
}

/// A tile loaded only to be converted into an accumulator layout (a
/// residual added to a product) is loaded in that layout: each thread loads
/// the elements it holds there (consecutive column pairs per load), its
/// addresses and mask recomputed from the index arithmetic, instead of a
/// coalesced load regrouped through shared memory (a second copy of the tile
/// in registers and two CTA barriers).
void loadsIntoAccumulators(func::FuncOp f) {
  SmallVector<kiln::ConvertLayoutOp> converts;
  f.walk([&](kiln::ConvertLayoutOp cvt) { converts.push_back(cvt); });
  for (kiln::ConvertLayoutOp cvt : converts) {
    auto mma = dyn_cast<kiln::MmaLayoutAttr>(kiln::getLayout(cvt.getType()));
    if (!mma)
      continue;
    // The load, possibly through one-operand element-wise ops (a cast to f32).
    SmallVector<Operation *> unary;
    Value src = cvt.getSrc();
    while (Operation *op = src.getDefiningOp()) {
      if (!isElementwise(op) || op->getNumOperands() != 1 || !src.hasOneUse())
        break;
      unary.push_back(op);
      src = op->getOperand(0);
    }
    auto load = src.getDefiningOp<kiln::LoadOp>();
    if (!load || !load->hasOneUse() || !isIndexArithmetic(load.getPtr()) ||
        (load.getMask() && !isIndexArithmetic(load.getMask())) || (load.getOther() && !isUniform(load.getOther())))
      continue;
    OpBuilder b(load);
    SmallVector<Value> operands;
    for (Value v : load->getOperands())
      operands.push_back(inLayout(b, v, mma));
    Operation *moved = b.clone(*load);
    moved->setOperands(operands);
    moved->getResult(0).setType(kiln::withLayout(load.getType(), mma));
    Value result = moved->getResult(0);
    for (Operation *op : llvm::reverse(unary)) {
      b.setInsertionPoint(op);
      IRMapping map;
      map.map(op->getOperand(0), result);
      Operation *copy = b.clone(*op, map);
      copy->getResult(0).setType(kiln::withLayout(op->getResult(0).getType(), mma));
      result = copy->getResult(0);
    }
    cvt.replaceAllUsesWith(result);
    cvt.erase();
    for (Operation *op : unary) // users first
      op->erase();
    load.erase();
  }
}

struct KilnRemoveLayoutConversionsPass
    : kiln::impl::KilnRemoveLayoutConversionsBase<KilnRemoveLayoutConversionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    kiln::ConvertLayoutOp::getCanonicalizationPatterns(patterns, ctx);
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (auto f : module.getOps<func::FuncOp>()) {
      if (!f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        continue;
      Propagation propagation(ctx);
      // Carrying a value across a loop in a new layout lets the loop body use
      // it there: propagate again until nothing moves.
      for (int round = 0; round < 8; ++round) {
        propagation.run(f);
        bool hoisted = propagation.hoistAcrossLoops(f);
        if (failed(applyPatternsGreedily(f, frozen)))
          return signalPassFailure();
        if (!hoisted)
          break;
      }
      columnsFromBroadcasts(f);
      loadsIntoAccumulators(f);
      operandsFromRegisters(f);
      if (failed(applyPatternsGreedily(f, frozen)))
        return signalPassFailure();
    }
  }
};

} // namespace
