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
// Any other wgmma product that reads its operands in place (rings, or A
// from registers) and whose result is first used further down its block is
// issued asynchronously too, and waited for just before that first use: the
// work in between (attention's softmax of one key block, while the scores
// of the next are computed) runs on the other units while the tensor cores
// work.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

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

/// Whether `v` is read in place from a ring buffer, possibly transposed.
bool inRing(Value v) {
  if (auto t = v.getDefiningOp<kiln::TransOp>())
    v = t.getSrc();
  return static_cast<bool>(v.getDefiningOp<kiln::LocalLoadOp>());
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

/// A product that nothing can overwrite while it is in flight: B read in
/// place from a ring, A from a ring or from registers (#kiln.dot_operand,
/// which the lowering keeps live until the wait). Operands staged in scratch
/// are not: the scratch area is reused by what follows.
bool readsInPlace(kiln::DotOp dot) {
  bool aInRegisters = isa_and_nonnull<kiln::DotOperandLayoutAttr>(kiln::getLayout(dot.getA().getType()));
  return (aInRegisters || inRing(dot.getA())) && inRing(dot.getB());
}

/// The op of `dot`'s block before which its result is first needed, when
/// there is other work between the two; null otherwise. Also null when an
/// op in between has regions (products issued inside them would be counted
/// wrongly by the waits) or copies into shared memory.
Operation *firstUseAfterWork(kiln::DotOp dot) {
  Block *block = dot->getBlock();
  Operation *first = nullptr;
  for (Operation *user : dot->getUsers()) {
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!top)
      return nullptr;
    if (!first || top->isBeforeInBlock(first))
      first = top;
  }
  if (!first || first == dot->getNextNode())
    return nullptr;
  // Copies in between could overwrite the ring buffers it reads.
  for (Operation *op = dot->getNextNode(); op != first; op = op->getNextNode())
    if (op->getNumRegions() != 0 || isa<kiln::AsyncCopyOp, kiln::AsyncTmaCopyOp>(op))
      return nullptr;
  return first;
}

/// Products whose result is first needed further down their block are
/// issued asynchronously and waited for just before that use. Waits count
/// the products issued after theirs (completion is in order): at most that
/// many may stay in flight.
void overlapWithFollowingWork(ModuleOp module) {
  SmallVector<std::pair<kiln::DotOp, Operation *>> work;
  module.walk([&](kiln::DotOp dot) {
    if (!onWgmma(dot) || dot.getAsync() || !readsInPlace(dot))
      return;
    if (Operation *use = firstUseAfterWork(dot))
      work.push_back({dot, use});
  });
  for (auto [dot, use] : work)
    dot.setAsync(true);
  OpBuilder b(module.getContext());
  for (auto [dot, use] : work) {
    int32_t later = 0;
    for (Operation *op = dot->getNextNode(); op != use; op = op->getNextNode())
      if (auto d = dyn_cast<kiln::DotOp>(op); d && d.getAsync())
        ++later;
    b.setInsertionPoint(use);
    auto wait = kiln::DotWaitOp::create(b, dot.getLoc(), dot.getType(), dot.getResult(),
                                        b.getI32IntegerAttr(later), UnitAttr());
    dot.getResult().replaceAllUsesExcept(wait.getResult(), wait);
  }
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
    overlapWithFollowingWork(getOperation());
  }
};

} // namespace
