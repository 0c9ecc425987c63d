//===- ReduceToGpu.cpp - kiln broadcast/reduce/argmax across threads -----===//
#include "GpuEmitter.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitBroadcast(kiln::BroadcastOp bc) {
  auto src = bc.getSrc().getType();
  auto dst = bc.getType();
  if (src.getShape().back() == 1 && dst.getShape().back() != 1)
    strides[bc] = 0;
  else
    setStride(bc, strideOf(bc.getSrc()));
  Layout ls = layoutOf(src), ld = layoutOf(dst);
  SmallVector<Value> in = get(bc.getSrc());
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

LogicalResult Emitter::emitReduce(kiln::ReduceOp red) {
  auto src = red.getSrc().getType();
  Type elemType = src.getElementType();
  Layout ls = layoutOf(src);
  SmallVector<Value> in = get(red.getSrc());
  bool shuffleable = elemType.isF32() || elemType.isInteger(32);
  bool perThread = int64_t(in.size()) == ls.perThread && !isUniform(red.getSrc());
  if (src.getRank() == 1 && ls.distributed && perThread && shuffleable) {
    // Per thread, then butterfly shuffles within the warp, then across warps.
    Value acc = in[0];
    for (size_t j = 1; j < in.size(); ++j)
      acc = combine(red.getKind(), acc, in[j]);
    for (int off = 16; off >= 1; off /= 2) {
      auto shfl = gpu::ShuffleOp::create(b, loc, acc, i32(off), i32(32), gpu::ShuffleMode::XOR);
      acc = combine(red.getKind(), acc, shfl.getShuffleResult());
    }
    int warps = threads / 32;
    if (warps > 1) {
      reserveSmem(warps * byteSize(elemType));
      Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, i32(0));
      auto ifOp = scf::IfOp::create(b, loc, isLane0, false);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        storeSmem(0, warp, acc);
      }
      barrier();
      acc = loadSmem(0, i32(0), elemType);
      for (int w = 1; w < warps; ++w)
        acc = combine(red.getKind(), acc, loadSmem(0, i32(w), elemType));
      barrier();
    }
    values[red] = {acc};
    return success();
  }
  // General path: through shared memory, each result element folds its row.
  SmallVector<Value> out;
  for (auto &row : rowsAlong(red.getSrc(), red.getType(), red.getAxis())) {
    Value acc = row[0];
    for (Value x : ArrayRef<Value>(row).drop_front())
      acc = combine(red.getKind(), acc, x);
    out.push_back(acc);
  }
  values[red] = out;
  return success();
}

SmallVector<SmallVector<Value>> Emitter::rowsAlong(Value src, Type resultType, int64_t axis) {
  auto tile = cast<RankedTensorType>(src.getType());
  Type stored = storageType(tile.getElementType());
  reserveSmem(spill(src, 0));
  barrier();
  SmallVector<int64_t> dstShape(tile.getShape());
  dstShape.erase(dstShape.begin() + axis);
  Layout ld = layoutOf(resultType);
  SmallVector<SmallVector<Value>> rows;
  for (int64_t j = 0; j < ld.perThread; ++j) {
    SmallVector<Value> idx = dstShape.empty() ? SmallVector<Value>{}
                                              : unravel(flatIndex(ld, j), dstShape);
    idx.insert(idx.begin() + axis, i32(0));
    SmallVector<Value> row;
    for (int64_t k = 0; k < tile.getDimSize(axis); ++k) {
      idx[axis] = i32(k);
      row.push_back(loadSmem(0, ravel(idx, tile.getShape()), stored));
    }
    rows.push_back(row);
  }
  barrier();
  return rows;
}

LogicalResult Emitter::emitArgMax(kiln::ArgMaxOp am) {
  bool fp = isa<FloatType>(am.getSrc().getType().getElementType());
  SmallVector<Value> out;
  for (auto &row : rowsAlong(am.getSrc(), am.getType(), am.getAxis())) {
    // Strictly greater keeps the first maximum.
    Value best = row[0], bestIdx = i32(0);
    for (int64_t k = 1; k < int64_t(row.size()); ++k) {
      Value x = row[k];
      Value gt = fp ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, best))
                    : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, x, best));
      best = arith::SelectOp::create(b, loc, gt, x, best);
      bestIdx = arith::SelectOp::create(b, loc, gt, i32(k), bestIdx);
    }
    out.push_back(bestIdx);
  }
  values[am] = out;
  return success();
}

} // namespace kiln::gpu_lowering
