//===- PipelineLoads.cpp - prefetch next iteration's loads in scf.for -----===//
#include "kiln/Lowering/Passes.h"

#include "Tma.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
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

/// True when every use of `load` is an operand of a kiln.dot (directly, or
/// transposed as the B operand): such tiles only need to reach shared memory,
/// where the tensor cores read them.
bool feedsOnlyDots(kiln::LoadOp load) {
  auto asB = [](kiln::TransOp t) {
    return !t->use_empty() && llvm::all_of(t->getUses(), [](OpOperand &use) {
      return isa<kiln::DotOp>(use.getOwner()) && use.getOperandNumber() == 1;
    });
  };
  return !load->use_empty() && llvm::all_of(load->getUses(), [&](OpOperand &use) {
    if (auto t = dyn_cast<kiln::TransOp>(use.getOwner()))
      return asB(t);
    auto dot = dyn_cast<kiln::DotOp>(use.getOwner());
    return dot && use.getOperandNumber() < 2;
  });
}

struct PipelineLoadsPass : kiln::impl::KilnPipelineLoadsBase<PipelineLoadsPass> {
  using KilnPipelineLoadsBase::KilnPipelineLoadsBase;

  void runOnOperation() override {
    if (numStages < 2)
      return;
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      if (failed(pipeline(loop)))
        return signalPassFailure();
  }

  /// The loads of `loop` that can be issued early, and the ops computing
  /// their operands (in block order).
  struct Prefetchable {
    SmallVector<kiln::LoadOp> loads;
    SmallVector<Operation *> slice;
  };
  Prefetchable prefetchable(scf::ForOp loop, bool dotOperands) {
    Block *body = loop.getBody();
    Value iv = loop.getInductionVar();
    Prefetchable p;
    llvm::SetVector<Operation *> slice;
    for (Operation &op : body->without_terminator()) {
      auto load = dyn_cast<kiln::LoadOp>(op);
      if (!load || feedsOnlyDots(load) != dotOperands)
        continue;
      llvm::SetVector<Operation *> own;
      if (!collectSlice(load, body, iv, own))
        continue;
      slice.insert(own.begin(), own.end());
      p.loads.push_back(load);
    }
    p.slice.assign(slice.begin(), slice.end());
    llvm::sort(p.slice, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return p;
  }

  LogicalResult pipeline(scf::ForOp loop) {
    // Only loops with tensor work to hide the loads behind: in streaming
    // loops (softmax, layernorm sweeps) the extra registers cost more than
    // the overlap gains, measured on H200.
    if (!llvm::any_of(*loop.getBody(), [](Operation &op) { return isa<kiln::DotOp>(op); }))
      return success();
    auto [staged, reads] = stageInvariantOperands(loop);
    ringPipeline(loop);
    if (staged) {
      // Wait for the staged operands just before the loop, or before a
      // product ahead of it that reads them too (a software-pipelined
      // loop's first step), leaving the copies committed after them (the
      // ring's first stages) in flight: groups complete in order.
      Operation *until = loop;
      for (Operation *read : reads)
        for (Operation *user : read->getUsers())
          if (Operation *top = loop->getBlock()->findAncestorOpInBlock(*user); top && top->isBeforeInBlock(until))
            until = top;
      int32_t later = 0;
      for (Operation *op = staged->getNextNode(); op != until; op = op->getNextNode())
        later += isa<kiln::AsyncCommitOp>(op);
      OpBuilder b(until);
      kiln::AsyncWaitOp::create(b, loop.getLoc(), b.getI32IntegerAttr(later));
      for (Operation *read : reads) // read after the wait (into registers, if not by tensor cores)
        read->moveBefore(until);
    }
    return registerPrefetch(loop);
  }

  /// Loads in the loop's block, before it, whose every use is a product
  /// operand inside this loop or later loops of the block, or of a product
  /// between the load and the loop (attention's queries): copied once into a
  /// one-buffer ring where the products read them in place, instead of
  /// being staged for every iteration. Returns the commit that closes their
  /// copies (null when there are none) and the reads of the buffers.
  std::pair<Operation *, SmallVector<Operation *>> stageInvariantOperands(scf::ForOp loop) {
    SmallVector<kiln::LoadOp> loads;
    for (Operation *op = loop->getPrevNode(); op; op = op->getPrevNode()) {
      auto load = dyn_cast<kiln::LoadOp>(op);
      if (!load) {
        // The copies start where the loads were and land by the loop:
        // nothing in between may write memory.
        if (!isMemoryEffectFree(op) && !isa<kiln::AsyncCopyOp, kiln::AsyncCommitOp, kiln::LocalAllocOp>(op))
          break;
        continue;
      }
      auto tile = dyn_cast<RankedTensorType>(load.getType());
      // Used in this loop and perhaps in later loops of the block (the
      // copy is waited for before this one), or by products between the
      // load and the loop (the copy is waited for before the first).
      bool inLoops = llvm::all_of(load->getUsers(), [&](Operation *user) {
        Operation *top = loop->getBlock()->findAncestorOpInBlock(*user);
        // before the loop: a product (feedsOnlyDots), perhaps through trans
        return top && (isa<scf::ForOp>(top) || top->isBeforeInBlock(loop));
      });
      // Used in this loop, or only by the products ahead of it (the keys
      // of a software-pipelined loop's first step, read in place too).
      bool here = llvm::any_of(load->getUsers(), [&](Operation *user) { return loop->isAncestor(user); });
      bool ahead = llvm::all_of(load->getUsers(), [&](Operation *user) {
        Operation *top = loop->getBlock()->findAncestorOpInBlock(*user);
        return top && top->isBeforeInBlock(loop);
      });
      if (tile && tile.getRank() == 2 && feedsOnlyDots(load) && inLoops && (here || ahead))
        loads.push_back(load);
    }
    if (loads.empty())
      return {};
    OpBuilder b(loop);
    Operation *commit = nullptr;
    SmallVector<Operation *> reads;
    for (kiln::LoadOp load : llvm::reverse(loads)) {
      b.setInsertionPoint(load);
      Location loc = load.getLoc();
      auto tile = cast<RankedTensorType>(load.getType());
      auto type = kiln::SharedType::get(b.getContext(), 1, tile.getShape(), tile.getElementType());
      Value ring = kiln::LocalAllocOp::create(b, loc, type);
      Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
      kiln::AsyncCopyOp::create(b, loc, load.getPtr(), ring, zero, load.getMask(), load.getOther());
      commit = kiln::AsyncCommitOp::create(b, loc);
      auto read = kiln::LocalLoadOp::create(b, loc, tile, ring, zero);
      load.getResult().replaceAllUsesWith(read.getResult());
      load.erase();
      reads.push_back(read);
    }
    return {commit, reads};
  }

  /// Dot operands go through a ring of `numStages` shared-memory buffers
  /// filled by asynchronous copies, `numStages - 1` iterations ahead:
  ///
  ///   copy 0 .. S-2; commit each
  ///   for i: wait until copy i landed (at most S-2 pending) and sync
  ///          copy i+S-1 into the buffer iteration i-1 read; commit
  ///          read buffer i % S, compute
  ///   wait for all
  void ringPipeline(scf::ForOp loop) {
    Prefetchable p = prefetchable(loop, /*dotOperands=*/true);
    if (p.loads.empty())
      return;
    int64_t stages = numStages;
    Location loc = loop.getLoc();
    OpBuilder b(loop);
    auto cst = [&](int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v)); };
    // Which loads TMA copies, and the kernel argument describing each one's tensor.
    SmallVector<std::optional<kiln::tma::Block>> blocks;
    SmallVector<Value> maps;
    bool anyTma = false, anyCpAsync = false;
    auto func = loop->getParentOfType<func::FuncOp>();
    for (kiln::LoadOp load : p.loads) {
      std::optional<kiln::tma::Block> block;
      if (tma && func && !loop->getParentOfType<scf::ForOp>())
        block = kiln::tma::matchTmaBlock(load.getPtr(), load.getMask(), load.getOther(),
                                             cast<RankedTensorType>(load.getType()));
      blocks.push_back(block);
      maps.push_back(block ? kiln::tma::addTensorMap(func, *block, cast<RankedTensorType>(load.getType()), load.getLoc())
                           : Value());
      anyTma |= block.has_value();
      anyCpAsync |= !block;
    }
    SmallVector<Value> rings;
    for (kiln::LoadOp load : p.loads) {
      auto tile = cast<RankedTensorType>(load.getType());
      auto ring = kiln::SharedType::get(b.getContext(), stages, tile.getShape(), tile.getElementType());
      rings.push_back(kiln::LocalAllocOp::create(b, load.getLoc(), ring));
    }
    Value barriers;
    if (anyTma) {
      auto type = kiln::SharedType::get(b.getContext(), stages, {1}, b.getI64Type());
      barriers = kiln::LocalAllocOp::create(b, loc, type);
      kiln::MBarrierInitOp::create(b, loc, barriers, b.getI32IntegerAttr(1));
    }
    Value iv = loop.getInductionVar();
    // Copies of iteration `at` (guarded by at < ub) into buffer `stage`.
    auto issue = [&](Value at, Value stage) {
      IRMapping map;
      map.map(iv, at);
      for (Operation *op : p.slice)
        b.clone(*op, map);
      Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, at, loop.getUpperBound());
      for (auto [load, ring, block, tensorMap] : llvm::zip(p.loads, rings, blocks, maps)) {
        if (block) {
          auto start = [&](const kiln::tma::Start &s) { return kiln::tma::materialize(b, loc, s, &map); };
          kiln::AsyncTmaCopyOp::create(b, load.getLoc(), tensorMap, start(block->row), start(block->col), ring,
                                       stage, barriers, stage, inRange);
          continue;
        }
        Value ptr = map.lookupOrDefault(load.getPtr());
        Value guard = kiln::SplatOp::create(b, loc, kiln::getMaskType(ptr.getType()), inRange);
        Value mask = load.getMask() ? Value(arith::AndIOp::create(b, loc, map.lookupOrDefault(load.getMask()), guard))
                                    : guard;
        Value other = load.getOther() ? map.lookupOrDefault(load.getOther()) : Value();
        kiln::AsyncCopyOp::create(b, load.getLoc(), ptr, ring, stage, mask, other);
      }
      if (anyTma)
        kiln::MBarrierArriveOp::create(b, loc, barriers, stage, inRange);
      if (anyCpAsync)
        kiln::AsyncCommitOp::create(b, loc);
    };
    for (int64_t s = 0; s + 1 < stages; ++s) {
      Value at = arith::AddIOp::create(b, loc, loop.getLowerBound(),
                                       arith::MulIOp::create(b, loc, loop.getStep(), cst(s)));
      issue(at, cst(s));
    }
    b.setInsertionPointToStart(loop.getBody());
    Value i = arith::DivSIOp::create(b, loc, arith::SubIOp::create(b, loc, iv, loop.getLowerBound()),
                                     loop.getStep());
    Value stage = arith::RemSIOp::create(b, loc, i, cst(stages));
    Value ahead = arith::RemSIOp::create(b, loc, arith::AddIOp::create(b, loc, i, cst(stages - 1)),
                                         cst(stages));
    // The copies below overwrite the buffer the previous iteration read:
    // every thread is past it after the barrier (async_wait has one).
    if (anyCpAsync)
      kiln::AsyncWaitOp::create(b, loc, b.getI32IntegerAttr(int32_t(stages - 2)));
    else
      kiln::BarrierOp::create(b, loc);
    issue(arith::AddIOp::create(b, loc, iv, arith::MulIOp::create(b, loc, loop.getStep(), cst(stages - 1))),
          ahead);
    if (anyTma) {
      // The k-th completion of barrier s is iteration s + k * stages's.
      Value phase = arith::RemSIOp::create(b, loc, arith::DivSIOp::create(b, loc, i, cst(stages)), cst(2));
      kiln::MBarrierWaitOp::create(b, loc, barriers, stage, phase);
    }
    for (auto [load, ring] : llvm::zip(p.loads, rings)) {
      b.setInsertionPoint(load);
      Value tile = kiln::LocalLoadOp::create(b, load.getLoc(), load.getType(), ring, stage);
      load.getResult().replaceAllUsesWith(tile);
      load.erase();
    }
    if (anyCpAsync) {
      b.setInsertionPointAfter(loop);
      kiln::AsyncWaitOp::create(b, loc, b.getI32IntegerAttr(0));
    }
  }

  /// Other loads are prefetched into registers one iteration ahead.
  LogicalResult registerPrefetch(scf::ForOp loop) {
    Prefetchable p = prefetchable(loop, /*dotOperands=*/false);
    if (p.loads.empty())
      return success();
    Value iv = loop.getInductionVar();
    // Emits the slice and the loads with induction variable `var` replaced by
    // `at`, guarded by `at < ub`.
    auto emitLoads = [&](OpBuilder &b, Value var, Value at) {
      IRMapping map;
      map.map(var, at);
      for (Operation *op : p.slice)
        b.clone(*op, map);
      Value inRange = arith::CmpIOp::create(b, loop.getLoc(), arith::CmpIPredicate::slt, at,
                                            loop.getUpperBound());
      SmallVector<Value> values;
      for (kiln::LoadOp load : p.loads) {
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
                              for (auto [load, arg] : llvm::zip(p.loads, bbArgs))
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
      return failure();
    for (kiln::LoadOp load : p.loads)
      load.erase();
    return success();
  }
};

} // namespace
