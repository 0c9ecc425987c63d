//===- ShapeToGpu.cpp - make_range, splat, expand_dims, reshape, broadcast, trans ===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitShape(Operation *op) {
  if (auto r = dyn_cast<kiln::MakeRangeOp>(op)) {
    if (std::optional<Mma> cols = colsOf(r.getType())) {
      auto &out = values[r];
      for (int64_t i = 0; i < colsPerThread(*cols); ++i)
        out.push_back(arith::AddIOp::create(b, loc, colOf(*cols, i), i32(r.getStart())));
      return success();
    }
    if (rowsOf(r.getType()))
      return r.emitError("convert-kiln-to-gpu: a range cannot be a row slice");
    Layout l = layoutOf(r.getType());
    auto &out = values[r];
    for (int64_t j = 0; j < l.perThread; ++j)
      out.push_back(arith::AddIOp::create(b, loc, flatIndex(l, j), i32(r.getStart())));
    return success();
  }
  if (auto s = dyn_cast<kiln::SplatOp>(op)) {
    values[s] = {raw(s.getSrc())[0]};
    return success();
  }
  {
    // Same element count and row-major order; the layout may group
    // elements differently (the last dimension can change), so regroup
    // through shared memory when it does.
    Value src = op->getOperand(0), dst = op->getResult(0);
    if (rowsOf(src) || rowsOf(dst)) {
      if (!rowsOf(src) || !rowsOf(dst) || !sameRows(*rowsOf(src), *rowsOf(dst)))
        return op->emitError("convert-kiln-to-gpu: a row slice changes rows");
      values[dst] = raw(src); // (M) and (M, 1): the same rows
      return success();
    }
    if (colsOf(src) || colsOf(dst)) {
      if (!colsOf(src) || !colsOf(dst) || !sameCols(*colsOf(src), *colsOf(dst)))
        return op->emitError("convert-kiln-to-gpu: a column slice changes columns");
      values[dst] = raw(src); // (N) and (1, N): the same columns
      return success();
    }
    Layout ls = layoutOf(src.getType()), ld = layoutOf(dst.getType());
    SmallVector<Value> in = raw(src);
    if (in.size() == 1 || (ls.distributed == ld.distributed && ls.vec == ld.vec)) {
      values[dst] = in;
    } else {
      Type stored = storageType(kiln::getElementTypeOrSelf(src.getType()));
      reserveSmem(spill(src, 0));
      barrier();
      SmallVector<Value> out;
      for (int64_t j = 0; j < ld.perThread; ++j)
        out.push_back(loadSmem(0, flatIndex(ld, j), stored));
      barrier();
      values[dst] = out;
    }
    return success();
  }
}

namespace {
/// For a broadcast between blocked layouts: the source slot of each of a
/// thread's destination elements, when every thread already holds the
/// sources of its destination elements, at the same slots whatever the
/// thread (a row of columns broadcast into rows dealt out in the same
/// columns: w of a (1, BLOCK) load into (ROWS, BLOCK)). Nothing then moves.
/// Checked for every thread and element: the layouts are static.
std::optional<SmallVector<int64_t>> sameThreadSlots(ArrayRef<int64_t> src, ArrayRef<int64_t> dst, const Layout &ls,
                                                    const Layout &ld, int64_t threads) {
  SmallVector<int64_t> slots(ld.perThread, -1);
  SmallVector<int64_t> idx(dst.size());
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t j = 0; j < ld.perThread; ++j) {
      // Blocked: slot j of thread t is flat element (g * T + t) * vec + v.
      int64_t f = ((j / ld.vec) * threads + t) * ld.vec + j % ld.vec;
      for (int64_t d = int64_t(dst.size()) - 1; d >= 0; --d) {
        idx[d] = f % dst[d];
        f /= dst[d];
      }
      int64_t e = 0;
      for (std::size_t d = 0; d < dst.size(); ++d)
        e = e * src[d] + (src[d] == 1 ? 0 : idx[d]);
      int64_t group = e / ls.vec, holder = group % threads;
      int64_t slot = (group / threads) * ls.vec + e % ls.vec;
      if (holder != t || (slots[j] >= 0 && slots[j] != slot))
        return std::nullopt;
      slots[j] = slot;
    }
  return slots;
}
} // namespace

LogicalResult Emitter::emitBroadcast(kiln::BroadcastOp bc) {
  auto src = bc.getSrc().getType();
  auto dst = bc.getType();
  if (std::optional<Mma> to = mmaOf(bc.getResult())) {
    // Along the rows of a row slice (or the columns of a column slice): the
    // accumulator layout, nothing moves.
    std::optional<Mma> rows = rowsOf(bc.getSrc());
    if (isUniform(bc.getSrc())) {
      values[bc] = raw(bc.getSrc());
      return success();
    }
    if (std::optional<Mma> cols = colsOf(bc.getSrc())) {
      if (!sameCols(*cols, *to))
        return bc.emitError("convert-kiln-to-gpu: a broadcast of a column slice into another accumulator layout");
      values[bc] = broadcastCols(raw(bc.getSrc()), *to);
      return success();
    }
    if (!rows || !sameRows(*rows, *to))
      return bc.emitError("convert-kiln-to-gpu: a broadcast into an accumulator layout needs a row "
                          "or column slice of it");
    values[bc] = broadcastRows(raw(bc.getSrc()), *to);
    return success();
  }
  if (inSlice(src) && !isUniform(bc.getSrc()))
    return bc.emitError("convert-kiln-to-gpu: a slice of an accumulator layout broadcasts into that "
                        "layout only");
  Layout ls = layoutOf(src), ld = layoutOf(dst);
  SmallVector<Value> in = raw(bc.getSrc());
  if (isUniform(bc.getSrc())) { // e.g. a splat: nothing moves
    values[bc] = {in[0]};
    return success();
  }
  auto srcFlat = [&](ArrayRef<int64_t> dstIdx) {
    int64_t f = 0;
    for (int64_t d = 0; d < dst.getRank(); ++d)
      f = f * src.getDimSize(d) + (src.getDimSize(d) == 1 ? 0 : dstIdx[d]);
    return f;
  };
  auto &out = values[bc];
  if (ls.distributed && ld.distributed && src.getRank() == dst.getRank())
    if (auto slots = sameThreadSlots(src.getShape(), dst.getShape(), ls, ld, threads)) {
      for (int64_t s : *slots)
        out.push_back(in[std::size_t(s)]);
      return success();
    }
  if (!ls.distributed && !ld.distributed) { // both replicated: a static gather
    for (int64_t j = 0; j < ld.perThread; ++j) {
      SmallVector<int64_t> idx(dst.getRank());
      int64_t f = j;
      for (int64_t d = dst.getRank() - 1; d >= 0; --d) {
        idx[d] = f % dst.getDimSize(d);
        f /= dst.getDimSize(d);
      }
      out.push_back(in[srcFlat(idx)]);
    }
    return success();
  }
  // Index arithmetic (ranges, splats, integer ops, pointer offsets) is
  // recomputed at each destination element instead of moving through
  // shared memory: no barriers between address computations and loads.
  if (canRematerialize(bc.getSrc(), 0)) {
    for (int64_t j = 0; j < ld.perThread; ++j) {
      SmallVector<Value> idx = unravel(flatIndex(ld, j), dst.getShape());
      for (int64_t d = 0; d < dst.getRank(); ++d)
        if (src.getDimSize(d) == 1)
          idx[d] = i32(0);
      out.push_back(rematerialize(bc.getSrc(), idx));
    }
    return success();
  }
  Type elem = storageType(src.getElementType());
  reserveSmem(spill(bc.getSrc(), 0));
  barrier();
  for (int64_t j = 0; j < ld.perThread; ++j) {
    SmallVector<Value> idx = unravel(flatIndex(ld, j), dst.getShape());
    for (int64_t d = 0; d < dst.getRank(); ++d)
      if (src.getDimSize(d) == 1)
        idx[d] = i32(0);
    out.push_back(loadSmem(0, ravel(idx, src.getShape()), elem));
  }
  barrier();
  return success();
}

LogicalResult Emitter::emitTrans(kiln::TransOp t) {
  if (isa<kiln::SharedLayoutAttr>(kiln::getLayout(t.getType()))) {
    if (!isa<kiln::SharedLayoutAttr>(kiln::getLayout(t.getSrc().getType())))
      return t.emitError("convert-kiln-to-gpu: a transposed view in shared memory needs its source there");
    values[t] = raw(t.getSrc()); // the dots read the source's tile transposed
    return success();
  }
  Value src = t.getSrc();
  if (isUniform(src)) {
    values[t] = raw(src);
    return success();
  }
  auto from = cast<RankedTensorType>(src.getType());
  Type stored = storageType(from.getElementType());
  reserveSmem(spill(src, 0));
  barrier();
  Layout l = layoutOf(t.getType());
  int64_t cols = t.getType().getDimSize(1);
  auto &out = values[t];
  for (int64_t j = 0; j < l.perThread; ++j) {
    // result (r, c) is source (c, r)
    Value flat = flatIndex(l, j);
    Value r = arith::DivUIOp::create(b, loc, flat, i32(cols));
    Value c = arith::RemUIOp::create(b, loc, flat, i32(cols));
    Value at = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, c, i32(from.getDimSize(1))), r);
    out.push_back(loadSmem(0, at, stored));
  }
  barrier();
  return success();
}

void populateShapeToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                RewritePatternSet &patterns) {
  addPattern<kiln::MakeRangeOp, &Emitter::emitShape>(patterns, converter, state);
  addPattern<kiln::SplatOp, &Emitter::emitShape>(patterns, converter, state);
  addPattern<kiln::ExpandDimsOp, &Emitter::emitShape>(patterns, converter, state);
  addPattern<kiln::ReshapeOp, &Emitter::emitShape>(patterns, converter, state);
  addPattern<kiln::BroadcastOp, &Emitter::emitBroadcast>(patterns, converter, state);
  addPattern<kiln::TransOp, &Emitter::emitTrans>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
