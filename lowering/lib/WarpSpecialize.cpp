//===- WarpSpecialize.cpp - a producer warp for TMA loops; persistent tiles ===//
//
// A TMA-fed loop as kiln-pipeline-loads and kiln-pipeline-mma leave it has
// every warp meet at a barrier each iteration: one thread may only refill
// the buffer the previous products read once every warpgroup has retired
// them. Here a producer warp of its own (kiln.producer) issues all the
// copies, paced by an "empty" barrier per buffer that the consumer warps
// arrive on when their products are done with it; the consumers never meet.
// With `persistent`, programs loop over the grid's tiles, so the producer
// fills the ring for the next tile during this tile's epilogue.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNWARPSPECIALIZE
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// What the rewrite needs of a kernel's TMA loop, found without changing it.
struct Plan {
  scf::ForOp loop;
  kiln::LocalAllocOp full;                     ///< the ring's barriers ("full")
  kiln::MBarrierInitOp init;                   ///< their initialisation
  SmallVector<kiln::LocalAllocOp> rings;       ///< the rings the copies fill
  SmallVector<Operation *> prologue;           ///< copies and arrivals before the loop
  SmallVector<kiln::AsyncTmaCopyOp> copies;    ///< the loop's copies (iteration i + S - 1)
  kiln::MBarrierArriveOp arrive;               ///< the loop's arrival on "full"
  kiln::MBarrierWaitOp wait;                   ///< the loop's wait on "full"
  kiln::DotWaitOp carried;                     ///< {pendings = 1, sync} after the product
  kiln::DotWaitOp done;                        ///< {pendings = 0} after the loop
  int64_t stages = 0;
};

bool isTile(Type t) { return isa<RankedTensorType>(t); }

/// Ops of `block` that `roots` depend on, in block order. Fails when one of
/// them is not a pure scalar op without regions (a producer warp can only
/// recompute those), or depends on an argument of `block` other than
/// `allowed`.
FailureOr<SmallVector<Operation *>> scalarSlice(ArrayRef<Value> roots, Block *block,
                                                ArrayRef<Value> allowed) {
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == block && !llvm::is_contained(allowed, v))
        return failure();
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (def->getBlock() != block || slice.contains(def))
      continue;
    if (def->getNumRegions() != 0 || !isMemoryEffectFree(def) ||
        llvm::any_of(def->getResultTypes(), isTile) || llvm::any_of(def->getOperandTypes(), isTile))
      return failure();
    slice.insert(def);
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Values of `slice` (ops of a loop body) taken from outside it.
SmallVector<Value> externalOperands(ArrayRef<Operation *> slice, Block *body) {
  SmallVector<Value> outside;
  for (Operation *op : slice)
    for (Value v : op->getOperands())
      if (!(isa<BlockArgument>(v) && cast<BlockArgument>(v).getOwner() == body) &&
          !(v.getDefiningOp() && v.getDefiningOp()->getBlock() == body))
        outside.push_back(v);
  return outside;
}

/// The ops of the loop body that compute its copies' coordinates.
FailureOr<SmallVector<Operation *>> copySlice(Plan &p) {
  SmallVector<Value> coords;
  for (kiln::AsyncTmaCopyOp copy : p.copies)
    coords.append({copy.getRow(), copy.getCol()});
  return scalarSlice(coords, p.loop.getBody(), {p.loop.getInductionVar()});
}

/// What the producer needs from outside the loop: its bounds, and the
/// values the copies' coordinates are computed from.
SmallVector<Value> producerInputs(Plan &p, ArrayRef<Operation *> inLoop) {
  Block *body = p.loop.getBody();
  SmallVector<Value> roots = externalOperands(inLoop, body);
  roots.append({p.loop.getLowerBound(), p.loop.getUpperBound(), p.loop.getStep()});
  for (kiln::AsyncTmaCopyOp copy : p.copies)
    for (Value v : {copy.getRow(), copy.getCol()})
      if (!v.getDefiningOp() || v.getDefiningOp()->getBlock() != body)
        roots.push_back(v);
  return roots;
}

std::optional<Plan> analyse(func::FuncOp f) {
  Block &top = f.getBody().front();
  if (top.getTerminator()->getNumOperands() != 0)
    return std::nullopt; // a kernel returns nothing; its body may become a loop
  Plan p;
  bool bad = false;
  f.walk([&](Operation *op) {
    if (isa<kiln::ProducerOp>(op))
      bad = true;
    auto copy = dyn_cast<kiln::AsyncTmaCopyOp>(op);
    if (!copy)
      return;
    auto full = copy.getBarriers().getDefiningOp<kiln::LocalAllocOp>();
    auto ring = copy.getRing().getDefiningOp<kiln::LocalAllocOp>();
    if (!full || !ring || full->getBlock() != &top || ring->getBlock() != &top ||
        (p.full && p.full != full)) {
      bad = true;
      return;
    }
    p.full = full;
    if (!llvm::is_contained(p.rings, ring))
      p.rings.push_back(ring);
    if (copy->getBlock() == &top) {
      p.prologue.push_back(copy);
      return;
    }
    auto loop = dyn_cast<scf::ForOp>(copy->getParentOp());
    if (!loop || loop->getBlock() != &top || (p.loop && p.loop != loop)) {
      bad = true;
      return;
    }
    p.loop = loop;
    p.copies.push_back(copy);
  });
  if (bad || !p.loop || p.copies.empty())
    return std::nullopt;
  p.stages = cast<kiln::SharedType>(p.full.getType()).getStages();
  Block *body = p.loop.getBody();
  // The loop: TMA copies only, one wait and one arrival on "full", the
  // product carried asynchronously.
  for (Operation &op : *body) {
    if (op.getNumRegions() != 0 || isa<kiln::AsyncCopyOp, kiln::AsyncWaitOp, kiln::BarrierOp>(op))
      return std::nullopt;
    if (auto w = dyn_cast<kiln::MBarrierWaitOp>(op)) {
      if (p.wait || w.getBarriers() != p.full.getResult())
        return std::nullopt;
      p.wait = w;
    } else if (auto a = dyn_cast<kiln::MBarrierArriveOp>(op)) {
      if (p.arrive || a.getBarriers() != p.full.getResult())
        return std::nullopt;
      p.arrive = a;
    } else if (auto dw = dyn_cast<kiln::DotWaitOp>(op)) {
      if (p.carried || !dw.getSync() || dw.getPendings() != 1)
        return std::nullopt;
      p.carried = dw;
    }
  }
  if (!p.wait || !p.arrive || !p.carried)
    return std::nullopt;
  for (Operation *user : p.loop->getUsers())
    if (auto dw = dyn_cast<kiln::DotWaitOp>(user); dw && dw.getPendings() == 0 && dw->getBlock() == &top)
      p.done = dw;
  if (!p.done)
    return std::nullopt;
  // Every other use of the barriers: their initialisation, and arrivals
  // that go with the prologue's copies.
  for (Operation *user : p.full->getUsers()) {
    if (auto init = dyn_cast<kiln::MBarrierInitOp>(user); init && init->getBlock() == &top && !p.init) {
      p.init = init;
      continue;
    }
    if (isa<kiln::AsyncTmaCopyOp>(user) || user == p.wait || user == p.arrive)
      continue;
    if (isa<kiln::MBarrierArriveOp>(user) && user->getBlock() == &top && user->isBeforeInBlock(p.loop)) {
      p.prologue.push_back(user);
      continue;
    }
    return std::nullopt;
  }
  if (!p.init || p.init.getArrivals() != 1)
    return std::nullopt;
  // What the producer recomputes must be pure scalar code.
  auto inLoop = copySlice(p);
  if (failed(inLoop) ||
      failed(scalarSlice(producerInputs(p, *inLoop), &top, SmallVector<Value>(top.getArguments()))))
    return std::nullopt;
  return p;
}

struct Builder {
  OpBuilder &b;
  Location loc;
  Value cst(int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v))); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y); }
  Value rem(Value x, Value y) { return arith::RemSIOp::create(b, loc, x, y); }
  /// Iterations of `for lb to ub step s` (s > 0).
  Value trips(Value lb, Value ub, Value step) {
    Value span = sub(ub, lb);
    Value rounded = add(span, sub(step, cst(1)));
    Value n = div(rounded, step);
    return arith::MaxSIOp::create(b, loc, n, cst(0));
  }
  /// The tile's program ids for tile `t` of a grid of extents `grid`, x fastest.
  std::array<Value, 3> tileIds(Value t, ValueRange grid) {
    Value rest = div(t, grid[0]);
    return {rem(t, grid[0]), rem(rest, grid[1]), div(rest, grid[1])};
  }
};

/// The producer's loop: for each iteration g of the ring, wait until buffer
/// g % S is empty, copy the iteration's tiles into it, arrive on "full".
void buildProducerLoop(OpBuilder &b, Plan &p, Value empty, Value base, IRMapping &map,
                       ArrayRef<Operation *> inLoop) {
  Location loc = p.loop.getLoc();
  Builder h{b, loc};
  Value lb = map.lookupOrDefault(p.loop.getLowerBound()), ub = map.lookupOrDefault(p.loop.getUpperBound()),
        step = map.lookupOrDefault(p.loop.getStep());
  auto loop = scf::ForOp::create(b, loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value iv = loop.getInductionVar();
  Value g = h.add(base, h.div(h.sub(iv, lb), step));
  Value s = h.rem(g, h.cst(p.stages));
  Value free = h.rem(h.add(h.div(g, h.cst(p.stages)), h.cst(1)), h.cst(2));
  kiln::MBarrierWaitOp::create(b, loc, empty, s, free);
  // The loop's copies are of iteration iv + (S - 1) * step.
  map.map(p.loop.getInductionVar(), h.sub(iv, h.mul(step, h.cst(p.stages - 1))));
  for (Operation *op : inLoop)
    b.clone(*op, map);
  for (kiln::AsyncTmaCopyOp copy : p.copies)
    kiln::AsyncTmaCopyOp::create(b, copy.getLoc(), copy.getMap(), map.lookupOrDefault(copy.getRow()),
                                 map.lookupOrDefault(copy.getCol()), copy.getRing(), s, p.full, s, Value());
  kiln::MBarrierArriveOp::create(b, loc, p.full, s, Value(), false);
}

/// Body of a loop over tiles until its work is moved in: yields what it carries.
void yieldCarried(OpBuilder &b, Location loc, Value, ValueRange carried) {
  scf::YieldOp::create(b, loc, carried);
}

void specialize(func::FuncOp f, Plan &p, bool persistent, int numWarps) {
  MLIRContext *ctx = f.getContext();
  Block &top = f.getBody().front();
  Location loc = p.loop.getLoc();
  OpBuilder b(ctx);
  Builder h{b, loc};

  // The rings and their barriers first: both kinds of warps use them.
  SmallVector<Operation *> hoisted(p.rings.begin(), p.rings.end());
  hoisted.append({p.full, p.init});
  Operation *last = nullptr;
  for (Operation *op : hoisted) {
    if (last)
      op->moveAfter(last);
    else
      op->moveBefore(&top.front());
    last = op;
  }
  b.setInsertionPointAfter(last);
  auto empty = kiln::LocalAllocOp::create(b, loc, p.full.getType());
  kiln::MBarrierInitOp::create(b, loc, empty, b.getI32IntegerAttr(numWarps));
  for (Operation *op : p.prologue)
    op->erase();

  // Persistent: the body loops over the tiles of the launch's grid, and
  // counts the ring's iterations across tiles.
  Value base = h.cst(0);
  SmallVector<Value> grid;
  Value program, programs, total; // the hardware grid's, and the tiles
  scf::ForOp tiles;
  if (persistent) {
    unsigned first = f.getNumArguments();
    for (int i = 0; i < 3; ++i)
      (void)f.insertArgument(first + i, b.getI32Type(), {}, loc);
    f->setAttr(kiln::KilnDialect::getVirtualGridAttrName(), b.getI32IntegerAttr(int32_t(first)));
    for (int i = 0; i < 3; ++i)
      grid.push_back(f.getArgument(first + i));
    // The user's program ids and counts are the tile's and the grid's.
    SmallVector<Operation *> info;
    f.walk([&](Operation *op) {
      if (isa<kiln::ProgramIdOp, kiln::NumProgramsOp>(op))
        info.push_back(op);
    });
    program = kiln::ProgramIdOp::create(b, loc, b.getI32Type(), 0);
    programs = kiln::NumProgramsOp::create(b, loc, b.getI32Type(), 0);
    total = h.mul(h.mul(grid[0], grid[1]), grid[2]);
    tiles = scf::ForOp::create(b, loc, program, total, programs, ValueRange{base}, yieldCarried);
    Block *body = tiles.getBody();
    // Everything after the loop header (up to the return) is the tile's work.
    body->getOperations().splice(body->begin(), top.getOperations(), std::next(tiles->getIterator()),
                                 std::prev(top.end()));
    b.setInsertionPointToStart(body);
    std::array<Value, 3> ids = h.tileIds(tiles.getInductionVar(), grid);
    for (Operation *op : info) {
      Value v = isa<kiln::ProgramIdOp>(op) ? ids[cast<kiln::ProgramIdOp>(op).getAxis()]
                                           : grid[cast<kiln::NumProgramsOp>(op).getAxis()];
      op->getResult(0).replaceAllUsesWith(v);
      op->erase();
    }
    base = tiles.getRegionIterArg(0);
    b.setInsertionPoint(tiles);
  } else {
    b.setInsertionPointAfter(base.getDefiningOp()); // after the barriers and the count's start
  }

  // The producer, before the consumers' code: the copies' coordinates and
  // the loop's bounds, recomputed; in a persistent kernel, in its own tile loop.
  {
    SmallVector<Operation *> inLoop = *copySlice(p);
    SmallVector<Value> allowed(top.getArguments());
    if (tiles)
      allowed.append({tiles.getInductionVar(), tiles.getRegionIterArg(0)});
    SmallVector<Operation *> outer = *scalarSlice(producerInputs(p, inLoop), p.loop->getBlock(), allowed);

    // One warp next to one warpgroup; next to several, a warpgroup of its
    // own, so that the lowering can hand its registers to the consumers
    // (setmaxnreg works on whole warpgroups).
    int producerWarps = numWarps >= 8 && numWarps % 4 == 0 ? 4 : 1;
    auto producer = kiln::ProducerOp::create(b, loc, b.getI32IntegerAttr(producerWarps));
    Block *pbody = new Block();
    producer.getBody().push_back(pbody);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(pbody);
    IRMapping map;
    Value pbase = base;
    scf::ForOp ptiles;
    if (tiles) {
      ptiles = scf::ForOp::create(b, loc, program, total, programs, ValueRange{tiles.getInitArgs()}, yieldCarried);
      map.map(tiles.getInductionVar(), ptiles.getInductionVar());
      map.map(base, ptiles.getRegionIterArg(0));
      pbase = ptiles.getRegionIterArg(0);
      b.setInsertionPointToStart(ptiles.getBody());
    }
    for (Operation *op : outer)
      b.clone(*op, map);
    buildProducerLoop(b, p, empty, pbase, map, inLoop);
    if (ptiles) {
      Value n = h.trips(map.lookupOrDefault(p.loop.getLowerBound()), map.lookupOrDefault(p.loop.getUpperBound()),
                        map.lookupOrDefault(p.loop.getStep()));
      ptiles.getBody()->getTerminator()->setOperands(ValueRange{h.add(pbase, n)});
    }
  }

  // The consumers: no copies; after each product, the previous buffer is
  // empty once this warp's earlier products are done.
  for (kiln::AsyncTmaCopyOp copy : p.copies)
    copy->erase();
  p.arrive->erase();
  p.carried.setSync(false);
  Block *body = p.loop.getBody();
  b.setInsertionPointToStart(body);
  Value lb = p.loop.getLowerBound(), ub = p.loop.getUpperBound(), step = p.loop.getStep();
  Value i = h.div(h.sub(p.loop.getInductionVar(), lb), step);
  Value g = h.add(base, i);
  if (tiles) {
    // Buffers and phases continue from the previous tiles' iterations.
    Value stage = h.rem(g, h.cst(p.stages));
    Value phase = h.rem(h.div(g, h.cst(p.stages)), h.cst(2));
    p.wait.getIndex().replaceAllUsesWith(stage);
    p.wait.getPhaseMutable().assign(phase);
  }
  b.setInsertionPointAfter(p.carried);
  Value prev = h.rem(h.add(g, h.cst(p.stages - 1)), h.cst(p.stages));
  Value notFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, i, h.cst(0));
  kiln::MBarrierArriveOp::create(b, loc, empty, prev, notFirst, true);
  b.setInsertionPointAfter(p.done);
  Value n = h.trips(lb, ub, step);
  Value lastStage = h.rem(h.add(base, h.sub(n, h.cst(1))), h.cst(p.stages));
  Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, n, h.cst(0));
  kiln::MBarrierArriveOp::create(b, loc, empty, lastStage, any, true);
  // The next tile's ring iterations follow this one's.
  if (tiles) {
    Operation *yield = tiles.getBody()->getTerminator();
    b.setInsertionPoint(yield);
    yield->setOperands(ValueRange{h.add(base, n)});
  }
}

struct KilnWarpSpecializePass : kiln::impl::KilnWarpSpecializeBase<KilnWarpSpecializePass> {
  using KilnWarpSpecializeBase::KilnWarpSpecializeBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto warps = module->getAttrOfType<IntegerAttr>("kiln.num_warps");
    if (!warps)
      return; // not through the layout passes: no TMA loops either
    for (auto f : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (!f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        continue;
      if (std::optional<Plan> p = analyse(f))
        specialize(f, *p, persistent, int(warps.getInt()));
    }
  }
};

} // namespace
