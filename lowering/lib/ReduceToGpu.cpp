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
  bool narrowFloat = elemType.isF16() || elemType.isBF16();
  bool shuffleable = elemType.isF32() || elemType.isInteger(32) || narrowFloat;
  if (src.getRank() == 1 && ls.distributed && !isUniform(red.getSrc()) && shuffleable) {
    // Per thread, then butterfly shuffles within the warp, then across warps
    // (16-bit floats are combined in f32).
    SmallVector<Value> in = get(red.getSrc());
    Type f32 = b.getF32Type();
    auto widen = [&](Value v) { return narrowFloat ? Value(arith::ExtFOp::create(b, loc, f32, v)) : v; };
    Type accType = narrowFloat ? f32 : elemType;
    Value acc = widen(in[0]);
    for (size_t j = 1; j < in.size(); ++j)
      acc = combine(red.getKind(), acc, widen(in[j]));
    for (int off = 16; off >= 1; off /= 2) {
      auto shfl = gpu::ShuffleOp::create(b, loc, acc, i32(off), i32(32), gpu::ShuffleMode::XOR);
      acc = combine(red.getKind(), acc, shfl.getShuffleResult());
    }
    int warps = threads / 32;
    if (warps > 1) {
      reserveSmem(warps * byteSize(accType));
      Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, i32(0));
      auto ifOp = scf::IfOp::create(b, loc, isLane0, false);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        storeSmem(0, warp, acc);
      }
      barrier();
      acc = loadSmem(0, i32(0), accType);
      for (int w = 1; w < warps; ++w)
        acc = combine(red.getKind(), acc, loadSmem(0, i32(w), accType));
      barrier();
    }
    values[red] = {narrowFloat ? Value(arith::TruncFOp::create(b, loc, elemType, acc)) : acc};
    return success();
  }
  // General path: each result element folds its row in a loop.
  values[red] = foldAlong(
      red.getSrc(), red.getType(), red.getAxis(), elemType,
      [&](Value x0) { return SmallVector<Value>{x0}; },
      [&](ValueRange carried, Value x, Value) { return SmallVector<Value>{combine(red.getKind(), carried[0], x)}; });
  return success();
}

int64_t Emitter::spillRowMajor(Value v, int64_t base) {
  auto it = mma.find(v);
  SmallVector<Value> in = raw(v);
  if (it == mma.end() || in.size() == 1)
    return spill(v, base);
  auto tile = cast<RankedTensorType>(v.getType());
  for (int64_t j = 0; j < int64_t(in.size()); ++j)
    storeSmem(base, mmaFlat(it->second, j), in[j]);
  return tile.getNumElements() * byteSize(storageType(tile.getElementType()));
}

SmallVector<Value> Emitter::foldAlong(Value src, Type resultType, int64_t axis, Type resultElem,
                                      function_ref<SmallVector<Value>(Value)> first,
                                      function_ref<SmallVector<Value>(ValueRange, Value, Value)> step) {
  auto tile = cast<RankedTensorType>(src.getType());
  Type stored = storageType(tile.getElementType());
  Type resStored = storageType(resultElem);
  int64_t srcBytes = spillRowMajor(src, 0);
  int64_t resBase = (srcBytes + 15) / 16 * 16;
  SmallVector<int64_t> dstShape(tile.getShape());
  dstShape.erase(dstShape.begin() + axis);
  int64_t nRes = 1;
  for (int64_t d : dstShape)
    nRes *= d;
  reserveSmem(resBase + nRes * byteSize(resStored));
  barrier();
  int64_t len = tile.getDimSize(axis), stride = 1;
  for (int64_t d = axis + 1; d < tile.getRank(); ++d)
    stride *= tile.getDimSize(d);
  // Thread t folds the rows of result elements t, t + T, ...
  for (int64_t i = 0; i * threads < nRes; ++i) {
    Value r = arith::AddIOp::create(b, loc, tid, i32(i * threads));
    auto fold = [&] {
      SmallVector<Value> idx = dstShape.empty() ? SmallVector<Value>{} : unravel(r, dstShape);
      idx.insert(idx.begin() + axis, i32(0));
      Value base = ravel(idx, tile.getShape());
      SmallVector<Value> carried = first(loadSmem(0, base, stored));
      auto loop = emitLoop(1, len, carried, [&](Value k, ValueRange acc) {
        Value at = arith::AddIOp::create(b, loc, base, arith::MulIOp::create(b, loc, k, i32(stride)));
        return step(acc, loadSmem(0, at, stored), k);
      });
      storeSmem(resBase, r, loop.getResult(0));
    };
    if ((i + 1) * threads <= nRes) {
      fold();
    } else {
      Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, i32(nRes));
      auto ifOp = scf::IfOp::create(b, loc, inRange, false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      fold();
    }
  }
  barrier();
  Layout ld = layoutOf(resultType);
  SmallVector<Value> out;
  for (int64_t j = 0; j < ld.perThread; ++j)
    out.push_back(loadSmem(resBase, flatIndex(ld, j), resStored));
  barrier();
  return out;
}

LogicalResult Emitter::emitArgMax(kiln::ArgMaxOp am) {
  auto src = am.getSrc().getType();
  Type elemType = src.getElementType();
  bool fp = isa<FloatType>(elemType);
  Layout ls = layoutOf(src);
  // Strictly greater keeps the first maximum.
  auto greater = [&](Value x, Value y) -> Value {
    return fp ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y))
              : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, x, y));
  };
  bool shuffleable = elemType.isF32() || elemType.isF16() || elemType.isBF16() || elemType.isInteger(32);
  if (src.getRank() == 1 && ls.distributed && !isUniform(am.getSrc()) && shuffleable) {
    // Per thread (its elements in increasing index order), then (value,
    // index) pairs across the warp, then across warps; ties go to the
    // smaller index.
    SmallVector<Value> in = get(am.getSrc());
    Type f32 = b.getF32Type();
    auto widen = [&](Value v) { return fp && !elemType.isF32() ? Value(arith::ExtFOp::create(b, loc, f32, v)) : v; };
    Value best = widen(in[0]), at = flatIndex(ls, 0);
    for (int64_t j = 1; j < int64_t(in.size()); ++j) {
      Value x = widen(in[j]);
      Value gt = greater(x, best);
      best = arith::SelectOp::create(b, loc, gt, x, best);
      at = arith::SelectOp::create(b, loc, gt, flatIndex(ls, j), at);
    }
    auto merge = [&](Value ov, Value oi) {
      Value eq = fp ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, ov, best))
                    : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ov, best));
      Value earlier = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, oi, at);
      Value take = arith::OrIOp::create(b, loc, greater(ov, best), arith::AndIOp::create(b, loc, eq, earlier));
      best = arith::SelectOp::create(b, loc, take, ov, best);
      at = arith::SelectOp::create(b, loc, take, oi, at);
    };
    for (int off = 16; off >= 1; off /= 2) {
      Value ov = gpu::ShuffleOp::create(b, loc, best, i32(off), i32(32), gpu::ShuffleMode::XOR).getShuffleResult();
      Value oi = gpu::ShuffleOp::create(b, loc, at, i32(off), i32(32), gpu::ShuffleMode::XOR).getShuffleResult();
      merge(ov, oi);
    }
    int warps = threads / 32;
    if (warps > 1) {
      Type valType = best.getType();
      int64_t idxBase = (warps * byteSize(valType) + 15) / 16 * 16;
      reserveSmem(idxBase + warps * 4);
      Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, i32(0));
      auto ifOp = scf::IfOp::create(b, loc, isLane0, false);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        storeSmem(0, warp, best);
        storeSmem(idxBase, warp, at);
      }
      barrier();
      best = loadSmem(0, i32(0), valType);
      at = loadSmem(idxBase, i32(0), b.getI32Type());
      for (int w = 1; w < warps; ++w)
        merge(loadSmem(0, i32(w), valType), loadSmem(idxBase, i32(w), b.getI32Type()));
      barrier();
    }
    values[am] = {at};
    return success();
  }
  values[am] = foldAlong(
      am.getSrc(), am.getType(), am.getAxis(), b.getI32Type(),
      [&](Value x0) { return SmallVector<Value>{i32(0), x0}; },
      [&](ValueRange carried, Value x, Value k) {
        Value gt = greater(x, carried[1]);
        return SmallVector<Value>{arith::SelectOp::create(b, loc, gt, k, carried[0]),
                                  arith::SelectOp::create(b, loc, gt, x, carried[1])};
      });
  return success();
}

} // namespace kiln::gpu_lowering
