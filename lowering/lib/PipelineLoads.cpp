//===- PipelineLoads.cpp - prefetch next iteration's loads in scf.for -----===//
#include "kiln/Lowering/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

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

/// A scalar `value + offset` (value may be null: the constant alone).
struct Start {
  Value value;
  int64_t offset = 0;
  bool operator==(const Start &o) const { return value == o.value && offset == o.offset; }
};

Value stripBroadcast(Value v) {
  while (auto bc = v.getDefiningOp<kiln::BroadcastOp>())
    v = bc.getSrc();
  return v;
}

/// The scalar every element of `v` equals, when `v` is a splat (possibly broadcast).
Value splatScalar(Value v) {
  if (auto sp = stripBroadcast(v).getDefiningOp<kiln::SplatOp>())
    return sp.getSrc();
  return {};
}

/// When element `idx` of tile `v` equals `start + idx[dim]` for every
/// index (a range along `dim`, constant along the other dimensions), that start.
std::optional<Start> matchRange(Value v, int64_t dim) {
  auto tile = dyn_cast<RankedTensorType>(v.getType());
  if (!tile)
    return std::nullopt;
  if (auto bc = v.getDefiningOp<kiln::BroadcastOp>()) {
    auto src = cast<RankedTensorType>(bc.getSrc().getType());
    if (src.getDimSize(dim) != tile.getDimSize(dim))
      return std::nullopt; // the range itself would be stretched
    return matchRange(bc.getSrc(), dim);
  }
  if (auto ed = v.getDefiningOp<kiln::ExpandDimsOp>()) {
    int64_t axis = int32_t(ed.getAxis());
    if (axis == dim)
      return std::nullopt;
    return matchRange(ed.getSrc(), dim > axis ? dim - 1 : dim);
  }
  if (auto mr = v.getDefiningOp<kiln::MakeRangeOp>()) {
    if (dim != 0)
      return std::nullopt;
    return Start{Value(), int64_t(int32_t(mr.getStart()))};
  }
  if (auto add = v.getDefiningOp<arith::AddIOp>()) {
    for (auto [x, y] : {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      Value s = splatScalar(y);
      if (!s)
        continue;
      std::optional<Start> inner = matchRange(x, dim);
      if (!inner)
        continue;
      if (IntegerAttr c; matchPattern(s, m_Constant(&c)))
        return Start{inner->value, inner->offset + c.getInt()};
      if (inner->value)
        return std::nullopt; // two scalar parts: not one start value
      return Start{s, inner->offset};
    }
  }
  return std::nullopt;
}

/// Whether `v` is an argument of the kernel (the function's entry block).
bool isKernelArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa<func::FuncOp>(arg.getOwner()->getParentOp());
}

/// A load TMA can perform: a (rows x cols) block of a row-major tensor.
struct TmaBlock {
  BlockArgument base, rows, cols, stride; ///< kernel arguments
  Start row, col;                          ///< the block's first row and column
};

/// `v < bound` along `dim` (a range compared with a splat kernel argument).
std::optional<std::pair<Start, Value>> matchBound(Value v, int64_t dim) {
  auto cmp = stripBroadcast(v).getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::slt ||
      cast<RankedTensorType>(cmp.getLhs().getType()).getDimSize(dim) !=
          cast<RankedTensorType>(v.getType()).getDimSize(dim))
    return std::nullopt;
  Value bound = splatScalar(cmp.getRhs());
  std::optional<Start> start = matchRange(cmp.getLhs(), dim);
  if (!bound || !start || !isKernelArgument(bound))
    return std::nullopt;
  return std::pair{*start, bound};
}

std::optional<TmaBlock> matchTmaBlock(kiln::LoadOp load) {
  auto tile = cast<RankedTensorType>(load.getType());
  Type elem = tile.getElementType();
  // Whole 128-byte swizzle panels of 16-bit or f32 elements (TF32 products).
  int64_t panelCols = elem.isF32() ? 32 : 64;
  if (tile.getRank() != 2 || !(elem.isF16() || elem.isBF16() || elem.isF32()) ||
      tile.getDimSize(1) % panelCols != 0 || tile.getDimSize(0) % 8 != 0 || tile.getDimSize(0) > 256 ||
      !load.getMask())
    return std::nullopt;
  if (Value other = load.getOther()) {
    Attribute c;
    if (!matchPattern(other, m_Constant(&c)) ||
        !(matchPattern(other, m_PosZeroFloat()) || matchPattern(other, m_Zero())))
      return std::nullopt;
  }
  // ptr = splat(base) + sum of offset terms (addptr chains, broadcasts and
  // additions in any order) = base + rowRange * stride + colRange.
  Value ptr = load.getPtr(), base;
  SmallVector<Value> terms;
  while (!base) {
    ptr = stripBroadcast(ptr);
    if (auto ap = ptr.getDefiningOp<kiln::AddPtrOp>()) {
      terms.push_back(ap.getOffset());
      ptr = ap.getPtr();
    } else if (auto sp = ptr.getDefiningOp<kiln::SplatOp>()) {
      base = sp.getSrc();
    } else {
      return std::nullopt;
    }
  }
  if (!isKernelArgument(base))
    return std::nullopt;
  SmallVector<Value> flat;
  while (!terms.empty()) {
    Value t = stripBroadcast(terms.pop_back_val());
    if (auto add = t.getDefiningOp<arith::AddIOp>()) {
      terms.append({add.getLhs(), add.getRhs()});
      continue;
    }
    flat.push_back(t);
  }
  if (flat.size() != 2)
    return std::nullopt;
  // A range spans the whole tile along its dimension (not one element stretched).
  auto spans = [&](Value v, int64_t dim) {
    return cast<RankedTensorType>(v.getType()).getDimSize(dim) == tile.getDimSize(dim);
  };
  std::optional<TmaBlock> found;
  for (auto [x, y] : {std::pair{flat[0], flat[1]}, std::pair{flat[1], flat[0]}}) {
    auto mul = x.getDefiningOp<arith::MulIOp>();
    std::optional<Start> col = spans(y, 1) ? matchRange(y, 1) : std::nullopt;
    if (!mul || !col)
      continue;
    for (auto [r, st] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
      Value stride = splatScalar(st);
      std::optional<Start> row = spans(r, 0) ? matchRange(r, 0) : std::nullopt;
      if (stride && row && isKernelArgument(stride))
        found = TmaBlock{cast<BlockArgument>(base), {}, {}, cast<BlockArgument>(stride), *row, *col};
    }
  }
  if (!found)
    return std::nullopt;
  // mask = (rowRange < rows) & (colRange < cols), in either order.
  auto both = stripBroadcast(load.getMask()).getDefiningOp<arith::AndIOp>();
  if (!both)
    return std::nullopt;
  for (auto [x, y] : {std::pair{both.getLhs(), both.getRhs()}, std::pair{both.getRhs(), both.getLhs()}}) {
    auto rows = matchBound(x, 0);
    auto cols = matchBound(y, 1);
    if (rows && cols && rows->first == found->row && cols->first == found->col) {
      found->rows = cast<BlockArgument>(rows->second);
      found->cols = cast<BlockArgument>(cols->second);
      return found;
    }
  }
  return std::nullopt;
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
    SmallVector<std::optional<TmaBlock>> blocks;
    SmallVector<Value> maps;
    bool anyTma = false, anyCpAsync = false;
    auto func = loop->getParentOfType<func::FuncOp>();
    for (kiln::LoadOp load : p.loads) {
      std::optional<TmaBlock> block;
      if (tma && func && !loop->getParentOfType<scf::ForOp>())
        block = matchTmaBlock(load);
      blocks.push_back(block);
      maps.push_back(block ? addTensorMap(func, *block, cast<RankedTensorType>(load.getType()), load.getLoc())
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
          auto start = [&](const Start &s) -> Value {
            Value v = s.value ? map.lookupOrDefault(s.value) : Value();
            if (!v)
              return cst(s.offset);
            return s.offset ? Value(arith::AddIOp::create(b, loc, v, cst(s.offset))) : v;
          };
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

  /// Appends to `func` the tensor-map argument of `block`'s tensor, with
  /// what the runtime needs to encode it (kernel argument numbers, and the
  /// box: the tile's rows by one 128-byte-wide panel).
  Value addTensorMap(func::FuncOp func, const TmaBlock &block, RankedTensorType tile, Location loc) {
    MLIRContext *ctx = func.getContext();
    Builder b(ctx);
    auto recipe = b.getDictionaryAttr({
        b.getNamedAttr("base", b.getI32IntegerAttr(int32_t(block.base.getArgNumber()))),
        b.getNamedAttr("rows", b.getI32IntegerAttr(int32_t(block.rows.getArgNumber()))),
        b.getNamedAttr("cols", b.getI32IntegerAttr(int32_t(block.cols.getArgNumber()))),
        b.getNamedAttr("stride", b.getI32IntegerAttr(int32_t(block.stride.getArgNumber()))),
        b.getNamedAttr("box", b.getDenseI32ArrayAttr(
                                  {int32_t(tile.getDimSize(0)), tile.getElementType().isF32() ? 32 : 64})),
    });
    unsigned index = func.getNumArguments();
    auto attrs = b.getDictionaryAttr({b.getNamedAttr(kiln::KilnDialect::getTensorMapAttrName(), recipe)});
    if (failed(func.insertArgument(index, kiln::TensorMapType::get(ctx), attrs, loc)))
      return {};
    return func.getArgument(index);
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
