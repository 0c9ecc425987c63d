//===- PipelineLoads.cpp - prefetch next iteration's loads in scf.for -----===//
#include "kiln/Lowering/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINELOADS
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Collects into `slice` the ops of `body` that `op` depends on. Fails when
/// the dependence reaches a loop-carried value, a load or an op with regions
/// or side effects: such loads cannot be issued an iteration early.
bool collectSlice(Operation *op, Block *body, Value iv, llvm::SetVector<Operation *> &slice) {
  for (Value operand : op->getOperands()) {
    if (auto arg = dyn_cast<BlockArgument>(operand)) {
      if (arg.getOwner() == body && arg != iv)
        return false; // loop-carried
      continue;
    }
    Operation *def = operand.getDefiningOp();
    if (def->getBlock() != body || slice.contains(def))
      continue; // defined outside the loop, or already collected
    if (def->getNumRegions() != 0 || isa<kiln::LoadOp>(def) || !isMemoryEffectFree(def))
      return false;
    if (!collectSlice(def, body, iv, slice))
      return false;
    slice.insert(def);
  }
  return true;
}

/// Adds `cond` (a scalar i1) to the mask of a cloned load.
void guardLoad(OpBuilder &b, kiln::LoadOp load, Value cond) {
  OpBuilder::InsertionGuard insertionGuard(b);
  b.setInsertionPoint(load);
  Location loc = load.getLoc();
  Type maskType = kiln::getMaskType(load.getPtr().getType());
  Value guard = cond;
  if (isa<RankedTensorType>(maskType))
    guard = kiln::SplatOp::create(b, loc, maskType, cond);
  Value mask = load.getMask() ? Value(arith::AndIOp::create(b, loc, load.getMask(), guard)) : guard;
  load.getMaskMutable().assign(mask);
}

struct PipelineLoadsPass : kiln::impl::KilnPipelineLoadsBase<PipelineLoadsPass> {
  using KilnPipelineLoadsBase::KilnPipelineLoadsBase;

  void runOnOperation() override {
    if (numStages < 2)
      return;
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      pipeline(loop);
  }

  void pipeline(scf::ForOp loop) {
    Block *body = loop.getBody();
    // Only loops with tensor work to hide the loads behind: in streaming
    // loops (softmax, layernorm sweeps) the extra registers cost more than
    // the overlap gains, measured on H200.
    if (!llvm::any_of(*body, [](Operation &op) { return isa<kiln::DotOp>(op); }))
      return;
    Value iv = loop.getInductionVar();
    SmallVector<kiln::LoadOp> loads;
    llvm::SetVector<Operation *> slice;
    for (Operation &op : body->without_terminator()) {
      auto load = dyn_cast<kiln::LoadOp>(op);
      if (!load)
        continue;
      llvm::SetVector<Operation *> own;
      if (!collectSlice(load, body, iv, own))
        continue;
      slice.insert(own.begin(), own.end());
      loads.push_back(load);
    }
    if (loads.empty())
      return;
    // Clone in block order so that definitions precede uses.
    SmallVector<Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });

    // Emits the slice and the loads with induction variable `var` replaced by
    // `at`, guarded by `at < ub`.
    auto emitLoads = [&](OpBuilder &b, Value var, Value at) {
      IRMapping map;
      map.map(var, at);
      for (Operation *op : ordered)
        b.clone(*op, map);
      Value inRange = arith::CmpIOp::create(b, loop.getLoc(), arith::CmpIPredicate::slt, at,
                                            loop.getUpperBound());
      SmallVector<Value> values;
      for (kiln::LoadOp load : loads) {
        auto copy = cast<kiln::LoadOp>(b.clone(*load, map));
        guardLoad(b, copy, inRange);
        values.push_back(copy.getResult());
      }
      return values;
    };

    OpBuilder b(loop);
    SmallVector<Value> first = emitLoads(b, iv, loop.getLowerBound());
    IRRewriter rewriter(loop.getContext());
    rewriter.setInsertionPoint(loop);
    auto replaced = cast<LoopLikeOpInterface>(loop.getOperation())
                        .replaceWithAdditionalYields(
                            rewriter, first, /*replaceInitOperandUsesInLoop=*/false,
                            [&](OpBuilder &yb, Location loc, ArrayRef<BlockArgument> bbArgs) {
                              for (auto [load, arg] : llvm::zip(loads, bbArgs))
                                load.getResult().replaceAllUsesWith(arg);
                              auto newLoop = cast<scf::ForOp>(yb.getInsertionBlock()->getParentOp());
                              // Issue the prefetch first, so that its latency overlaps the
                              // whole iteration's work.
                              yb.setInsertionPointToStart(newLoop.getBody());
                              Value next = arith::AddIOp::create(yb, loc, newLoop.getInductionVar(),
                                                                 newLoop.getStep());
                              // The body now lives in the new loop, with its induction variable.
                              return emitLoads(yb, newLoop.getInductionVar(), next);
                            });
    if (failed(replaced))
      return signalPassFailure();
    for (kiln::LoadOp load : loads)
      load.erase();
  }
};

} // namespace
