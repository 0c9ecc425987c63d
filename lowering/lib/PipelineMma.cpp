//===- PipelineMma.cpp - keep Hopper's asynchronous products in flight ----===//
//
// A pipelined loop whose one product runs on wgmma (#kiln.mma<version = 3>)
// would otherwise wait for each product before the next iteration, leaving
// the tensor cores idle while it waits for its copies, synchronises and
// issues the next ones. Here the product becomes asynchronous: it waits
// only for the previous iteration's product (kiln.dot_wait, pendings 1),
// the copies of the iteration (cp.async or TMA) are issued after that wait
// and a barrier (the buffer they overwrite is the one the previous products
// read), and the loop's result is waited for once, after the loop.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINEMMA
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

bool onWgmma(kiln::DotOp dot) {
  auto mma = dyn_cast_or_null<kiln::MmaLayoutAttr>(kiln::getLayout(dot.getType()));
  return mma && mma.getVersion() == 3;
}

/// The loop's one product, when it is on wgmma and its accumulator is only
/// carried by the loop: its iteration argument feeds it alone and its result
/// is only yielded, at the same position.
kiln::DotOp carriedWgmma(scf::ForOp loop) {
  kiln::DotOp found;
  for (Operation &op : *loop.getBody()) {
    if (op.getNumRegions() != 0)
      return {}; // nested control flow: leave it alone
    if (auto dot = dyn_cast<kiln::DotOp>(op)) {
      if (found)
        return {};
      found = dot;
    }
  }
  if (!found || !onWgmma(found) || found.getAsync())
    return {};
  // Operands staged in scratch would be overwritten while in flight.
  auto inRing = [](Value v) {
    if (auto t = v.getDefiningOp<kiln::TransOp>())
      v = t.getSrc();
    return static_cast<bool>(v.getDefiningOp<kiln::LocalLoadOp>());
  };
  if (!inRing(found.getA()) || !inRing(found.getB()))
    return {};
  auto arg = dyn_cast<BlockArgument>(found.getAcc());
  if (!arg || arg.getOwner() != loop.getBody() || !arg.hasOneUse() || !found->hasOneUse())
    return {};
  auto yield = dyn_cast<scf::YieldOp>(*found->getUsers().begin());
  if (!yield || loop.getTiedLoopYieldedValue(arg)->get() != found.getResult())
    return {};
  return found;
}

struct KilnPipelineMmaPass : kiln::impl::KilnPipelineMmaBase<KilnPipelineMmaPass> {
  void runOnOperation() override {
    SmallVector<std::pair<scf::ForOp, kiln::DotOp>> work;
    getOperation().walk([&](scf::ForOp loop) {
      if (kiln::DotOp dot = carriedWgmma(loop))
        work.push_back({loop, dot});
    });
    OpBuilder b(&getContext());
    for (auto [loop, dot] : work) {
      dot.setAsync(true);
      b.setInsertionPointAfter(dot);
      auto wait = kiln::DotWaitOp::create(b, dot.getLoc(), dot.getType(), dot.getResult(),
                                          b.getI32IntegerAttr(1), b.getUnitAttr());
      dot.getResult().replaceAllUsesExcept(wait.getResult(), wait);
      // The copies of this iteration write the buffer the previous
      // iteration's products read: after they are done, in every warpgroup.
      // The wait synchronises the program, so the barrier that guarded the
      // buffer for TMA copies goes.
      Operation *after = wait;
      for (Operation &op : llvm::make_early_inc_range(*loop.getBody())) {
        if (!op.isBeforeInBlock(dot))
          continue;
        if (isa<kiln::BarrierOp>(op)) {
          op.erase();
          continue;
        }
        if (isa<kiln::AsyncCopyOp, kiln::AsyncCommitOp, kiln::AsyncTmaCopyOp, kiln::MBarrierArriveOp>(op)) {
          op.moveAfter(after);
          after = &op;
        }
      }
      // The loop's result is complete once the last product is.
      unsigned position = wait.getResult().getUses().begin()->getOperandNumber();
      Value result = loop.getResult(position);
      b.setInsertionPointAfter(loop);
      auto done = kiln::DotWaitOp::create(b, dot.getLoc(), result.getType(), result,
                                          b.getI32IntegerAttr(0), UnitAttr());
      result.replaceAllUsesExcept(done.getResult(), done);
    }
  }
};

} // namespace
