//===- ReduceToGpu.cpp - kiln broadcast/reduce/argmax across threads -----===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

Value Emitter::warpTotal(Value source, kiln::ReduceKind kind, Type acc) {
  SmallVector<Value> in = raw(source);
  auto widen = [&](Value v) { return v.getType() != acc ? Value(arith::ExtFOp::create(b, loc, acc, v)) : v; };
  Value x = widen(in[0]);
  for (size_t j = 1; j < in.size(); ++j)
    x = combine(kind, x, widen(in[j]));
  for (int off = 16; off >= 1; off /= 2)
    x = combine(kind, x, gpu::ShuffleOp::create(b, loc, x, i32(off), i32(32), gpu::ShuffleMode::XOR).getShuffleResult());
  return x;
}

Value Emitter::narrowTo(Type elemType, Value v) {
  return elemType.isF16() || elemType.isBF16() ? Value(arith::TruncFOp::create(b, loc, elemType, v)) : v;
}

bool Emitter::reducesRows(kiln::ReduceOp red) {
  auto src = red.getSrc().getType();
  Type elemType = src.getElementType();
  return mmaOf(red.getSrc()) && src.getRank() == 2 && red.getAxis() == 1 && !isUniform(red.getSrc()) &&
         (elemType.isF32() || elemType.isF16() || elemType.isBF16() || elemType.isInteger(32));
}

SmallVector<Value> Emitter::rowPartials(kiln::ReduceOp red) {
  const Mma m = *mmaOf(red.getSrc());
  Type elemType = red.getSrc().getType().getElementType();
  bool narrowFloat = elemType.isF16() || elemType.isBF16();
  auto widen = [&](Value v) { return narrowFloat ? Value(arith::ExtFOp::create(b, loc, b.getF32Type(), v)) : v; };
  SmallVector<Value> in = raw(red.getSrc()), out;
  // A thread's two columns of each 8-column tile of its row, then the four
  // lanes of the quad that share the row.
  for (int64_t i = 0; i < rowsPerThread(m); ++i) {
    int64_t tm = i / 2, half = i % 2;
    Value x;
    for (int64_t tn = 0; tn < m.tilesN(); ++tn)
      for (int64_t c = 0; c < 2; ++c) {
        Value e = widen(in[(tm * m.tilesN() + tn) * 4 + half * 2 + c]);
        x = x ? combine(red.getKind(), x, e) : e;
      }
    for (int off = 1; off <= 2; off *= 2)
      x = combine(red.getKind(), x,
                  gpu::ShuffleOp::create(b, loc, x, i32(off), i32(32), gpu::ShuffleMode::XOR).getShuffleResult());
    out.push_back(x);
  }
  return out;
}

std::optional<Emitter::Exchange> Emitter::exchangeFor(kiln::ReduceOp red) {
  auto src = red.getSrc().getType();
  Type elemType = src.getElementType();
  bool narrowFloat = elemType.isF16() || elemType.isBF16();
  Type acc = narrowFloat ? b.getF32Type() : elemType;
  auto finish = [this, elemType](Value v) { return narrowTo(elemType, v); };
  auto kind = red.getKind();
  if (reducesRows(red)) {
    const Mma m = *mmaOf(red.getSrc());
    if (m.wn == 1)
      return std::nullopt; // the quad's shuffles are the whole reduction
    // The warps of a warp row cover different columns: their partial
    // results meet in shared memory, [wn][M].
    Exchange ex;
    ex.bytes = m.wn * m.M * byteSize(acc);
    ex.publish = [this, red, m](int64_t base) {
      SmallVector<Value> partial = rowPartials(red);
      Value wc = arith::RemUIOp::create(b, loc, warp, i32(m.wn));
      Value mine = arith::MulIOp::create(b, loc, wc, i32(m.M));
      onlyIf(isZero(arith::RemUIOp::create(b, loc, lane, i32(4))), [&] {
        for (int64_t i = 0; i < rowsPerThread(m); ++i)
          storeSmem(base, arith::AddIOp::create(b, loc, mine, rowOf(m, i)), partial[i]);
      });
    };
    ex.collect = [this, m, acc, kind, finish](int64_t base) {
      SmallVector<Value> out;
      for (int64_t i = 0; i < rowsPerThread(m); ++i) {
        Value row = rowOf(m, i);
        Value x = loadSmem(base, row, acc);
        for (int64_t w = 1; w < m.wn; ++w)
          x = combine(kind, x, loadSmem(base, arith::AddIOp::create(b, loc, row, i32(w * m.M)), acc));
        out.push_back(finish(x));
      }
      return out;
    };
    return ex;
  }
  if (mmaOf(red.getSrc()) || rowsOf(red.getResult()) || colsOf(red.getResult()) || colsOf(red.getSrc()))
    return std::nullopt;
  Layout ls = layoutOf(src);
  bool shuffleable = elemType.isF32() || elemType.isInteger(32) || narrowFloat;
  if (src.getRank() == 1 && ls.distributed && !isUniform(red.getSrc()) && shuffleable) {
    int warps = threads / 32;
    if (warps == 1)
      return std::nullopt; // the warp's shuffles are the whole reduction
    // Per thread, then butterfly shuffles within the warp, then across warps
    // (16-bit floats are combined in f32).
    Exchange ex;
    ex.bytes = warps * byteSize(acc);
    ex.publish = [this, source = red.getSrc(), kind, acc](int64_t base) {
      Value x = warpTotal(source, kind, acc);
      onlyIf(isZero(lane), [&] { storeSmem(base, warp, x); });
    };
    ex.collect = [this, warps, kind, acc, finish](int64_t base) {
      Value x = loadSmem(base, i32(0), acc);
      for (int w = 1; w < warps; ++w)
        x = combine(kind, x, loadSmem(base, i32(w), acc));
      return SmallVector<Value>{finish(x)};
    };
    return ex;
  }
  Layout ld = layoutOf(red.getType());
  if (!ls.distributed && !ld.distributed)
    return std::nullopt;
  return reduceAxisInParallel(red);
}

LogicalResult Emitter::emitReduce(kiln::ReduceOp red) {
  if (values.contains(red.getResult()))
    return success(); // lowered with the reduction before it, in one exchange
  if (auto first = exchangeFor(red)) {
    // The reductions right after this one whose sources are already lowered
    // (none reads another's result) exchange with it: every publish, one
    // barrier, every collect, one barrier, instead of two barriers each.
    // The layernorm statistics of a few rows, or the rows of a decode
    // product, are such runs.
    SmallVector<std::pair<kiln::ReduceOp, Exchange>> group;
    group.emplace_back(red, std::move(*first));
    for (Operation *next = red->getNextNode(); next; next = next->getNextNode()) {
      auto r = dyn_cast<kiln::ReduceOp>(next);
      if (!r || !values.contains(r.getSrc()) || state.scratchBaseFor(r) != scratchBase)
        break;
      auto ex = exchangeFor(r);
      if (!ex)
        break;
      group.emplace_back(r, std::move(*ex));
    }
    SmallVector<int64_t> offsets;
    int64_t bytes = 0;
    for (auto &member : group) {
      offsets.push_back(bytes);
      bytes += (member.second.bytes + 15) / 16 * 16;
    }
    reserveSmem(bytes);
    for (auto [member, offset] : llvm::zip(group, offsets))
      member.second.publish(offset);
    barrier();
    for (auto [member, offset] : llvm::zip(group, offsets))
      values[member.first.getResult()] = member.second.collect(offset);
    barrier();
    return success();
  }
  auto src = red.getSrc().getType();
  Type elemType = src.getElementType();
  bool narrowFloat = elemType.isF16() || elemType.isBF16();
  auto finish = [&](Value v) { return narrowTo(elemType, v); };
  if (reducesRows(red)) { // one warp column: no exchange
    SmallVector<Value> out;
    for (Value x : rowPartials(red))
      out.push_back(finish(x));
    values[red] = std::move(out);
    return success();
  }
  if (mmaOf(red.getSrc()) || rowsOf(red.getResult()) || colsOf(red.getResult()) || colsOf(red.getSrc()))
    return red.emitError("convert-kiln-to-gpu: only reductions along the rows of an accumulator "
                         "(f32, f16, bf16, i32) leave a row slice of it");
  Layout ls = layoutOf(src);
  bool shuffleable = elemType.isF32() || elemType.isInteger(32) || narrowFloat;
  if (src.getRank() == 1 && ls.distributed && !isUniform(red.getSrc()) && shuffleable) {
    // One warp: butterfly shuffles are the whole reduction.
    Type acc = narrowFloat ? b.getF32Type() : elemType;
    values[red] = {finish(warpTotal(red.getSrc(), red.getKind(), acc))};
    return success();
  }
  Layout ld = layoutOf(red.getType());
  if (!ls.distributed && !ld.distributed && !isUniform(red.getSrc())) {
    // Every thread holds every element: reduce in registers, no exchange.
    SmallVector<Value> in = raw(red.getSrc());
    ArrayRef<int64_t> shape = src.getShape();
    int64_t axis = red.getAxis(), len = shape[axis], inner = 1;
    for (int64_t d = axis + 1; d < src.getRank(); ++d)
      inner *= shape[d];
    SmallVector<Value> out;
    for (int64_t r = 0; r < ld.numel; ++r) {
      int64_t outer = r / inner, in0 = r % inner;
      auto at = [&](int64_t k) { return in[(outer * len + k) * inner + in0]; };
      // A balanced tree: log-depth dependence chains.
      SmallVector<Value> level;
      for (int64_t k = 0; k < len; ++k)
        level.push_back(narrowFloat ? Value(arith::ExtFOp::create(b, loc, b.getF32Type(), at(k))) : at(k));
      while (level.size() > 1) {
        SmallVector<Value> next;
        for (size_t i = 0; i + 1 < level.size(); i += 2)
          next.push_back(combine(red.getKind(), level[i], level[i + 1]));
        if (level.size() % 2)
          next.push_back(level.back());
        level = next;
      }
      out.push_back(finish(level[0]));
    }
    values[red] = out;
    return success();
  }
  // General path: each result element folds its row in a loop.
  values[red] = foldAlong(
      red.getSrc(), red.getType(), red.getAxis(), elemType,
      [&](Value x0) { return SmallVector<Value>{x0}; },
      [&](ValueRange carried, Value x, Value) { return SmallVector<Value>{combine(red.getKind(), carried[0], x)}; });
  return success();
}

std::optional<Emitter::Exchange> Emitter::reduceAxisInParallel(kiln::ReduceOp red) {
  auto src = red.getSrc().getType();
  Type elemType = src.getElementType();
  int64_t rank = src.getRank(), axis = red.getAxis();
  Layout ls = layoutOf(src);
  bool narrowFloat = elemType.isF16() || elemType.isBF16();
  if (!(elemType.isF32() || elemType.isInteger(32) || narrowFloat) || !ls.distributed ||
      isUniform(red.getSrc()) || rank < 2 ||
      !(axis == rank - 1 || (rank == 2 && axis == 0)))
    return std::nullopt;
  // Thread t holds groups q = g * T + t (g = 0 .. perThread / vec - 1) of
  // `vec` consecutive elements of one row; a row is G = L / vec groups.
  int64_t L = src.getShape().back(), vec = ls.vec, G = L / vec, T = threads;
  int64_t groups = ls.perThread / vec, warps = T / 32;
  Type acc = narrowFloat ? b.getF32Type() : elemType;
  auto kind = red.getKind();
  auto widen = [this, acc](Value v) { return v.getType() != acc ? Value(arith::ExtFOp::create(b, loc, acc, v)) : v; };
  auto shuffleDown = [this, kind](Value x, int64_t from, int64_t to) { // xor offsets from, from/2, .., to
    for (int64_t off = from; off >= to; off /= 2)
      x = combine(kind, x,
                  gpu::ShuffleOp::create(b, loc, x, i32(off), i32(32), gpu::ShuffleMode::XOR).getShuffleResult());
    return x;
  };
  Layout ld = layoutOf(red.getType());
  auto finish = [this, elemType](Value v) { return narrowTo(elemType, v); };
  Exchange ex;
  Value source = red.getSrc();
  if (axis == rank - 1) {
    // Segments of S consecutive groups lie in one row and one warp: combine
    // within a thread, then across the segment's lanes, then the row's
    // G / S segments through shared memory.
    int64_t S = G % 32 == 0 ? 32 : 32 % G == 0 ? G : 1;
    int64_t perRow = G / S;
    if (perRow > 32)
      return std::nullopt;
    ex.bytes = ls.numel / vec / S * byteSize(acc);
    ex.publish = [=, this](int64_t base) {
      SmallVector<Value> in = raw(source);
      Value laneInSeg = S == 1 ? Value() : arith::RemUIOp::create(b, loc, lane, i32(S));
      for (int64_t g = 0; g < groups; ++g) {
        Value x = widen(in[g * vec]);
        for (int64_t v = 1; v < vec; ++v)
          x = combine(kind, x, widen(in[g * vec + v]));
        x = shuffleDown(x, S / 2, 1);
        Value seg = arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, tid, i32(g * T)), i32(S));
        onlyIf(S == 1 ? Value() : isZero(laneInSeg), [&] { storeSmem(base, seg, x); });
      }
    };
    ex.collect = [=, this](int64_t base) {
      SmallVector<Value> out;
      for (int64_t j = 0; j < ld.perThread; ++j) {
        Value first = arith::MulIOp::create(b, loc, flatIndex(ld, j), i32(perRow));
        Value r = loadSmem(base, first, acc);
        for (int64_t i = 1; i < perRow; ++i)
          r = combine(kind, r, loadSmem(base, arith::AddIOp::create(b, loc, first, i32(i)), acc));
        out.push_back(finish(r));
      }
      return out;
    };
    return ex;
  }
  // Axis 0 of (R, L): when G divides T every group of thread t covers the
  // same columns ((t % G) * vec ..), so a thread combines its groups, lanes
  // t, t + G, .. combine by shuffles (G < 32) and warps (or thread blocks of
  // G) through shared memory.
  if (T % G != 0)
    return std::nullopt;
  int64_t parts = G < 32 ? warps : T / G;
  if (parts > 32)
    return std::nullopt;
  ex.bytes = parts * L * byteSize(acc);
  ex.publish = [=, this](int64_t base) {
    SmallVector<Value> in = raw(source);
    Value colBlock = arith::RemUIOp::create(b, loc, tid, i32(G));
    Value part = G < 32 ? warp : Value(arith::DivUIOp::create(b, loc, tid, i32(G)));
    Value at = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, part, i32(L)),
                                     arith::MulIOp::create(b, loc, colBlock, i32(vec)));
    SmallVector<Value> partial;
    for (int64_t v = 0; v < vec; ++v) {
      Value x = widen(in[v]);
      for (int64_t g = 1; g < groups; ++g)
        x = combine(kind, x, widen(in[g * vec + v]));
      partial.push_back(G < 32 ? shuffleDown(x, 16, G) : x);
    }
    Value writer = G < 32 ? Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane, i32(G))) : Value();
    onlyIf(writer, [&] {
      for (int64_t v = 0; v < vec; ++v)
        storeSmem(base, arith::AddIOp::create(b, loc, at, i32(v)), partial[v]);
    });
  };
  ex.collect = [=, this](int64_t base) {
    SmallVector<Value> out;
    for (int64_t j = 0; j < ld.perThread; ++j) {
      Value c = flatIndex(ld, j);
      Value r = loadSmem(base, c, acc);
      for (int64_t p = 1; p < parts; ++p)
        r = combine(kind, r, loadSmem(base, arith::AddIOp::create(b, loc, c, i32(p * L)), acc));
      out.push_back(finish(r));
    }
    return out;
  };
  return ex;
}

SmallVector<Value> Emitter::foldAlong(Value src, Type resultType, int64_t axis, Type resultElem,
                                      function_ref<SmallVector<Value>(Value)> first,
                                      function_ref<SmallVector<Value>(ValueRange, Value, Value)> step) {
  auto tile = cast<RankedTensorType>(src.getType());
  Type stored = storageType(tile.getElementType());
  Type resStored = storageType(resultElem);
  int64_t srcBytes = spill(src, 0);
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
    bool whole = (i + 1) * threads <= nRes;
    onlyIf(whole ? Value() : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, i32(nRes))),
           fold);
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
    SmallVector<Value> in = raw(am.getSrc());
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
      onlyIf(isZero(lane), [&] {
        storeSmem(0, warp, best);
        storeSmem(idxBase, warp, at);
      });
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
  if (src.getRank() == 1 && !ls.distributed && !isUniform(am.getSrc())) {
    // Every thread holds every element: scan in registers (the first maximum wins).
    SmallVector<Value> in = raw(am.getSrc());
    Value best = in[0], at = i32(0);
    for (int64_t j = 1; j < int64_t(in.size()); ++j) {
      Value gt = greater(in[j], best);
      best = arith::SelectOp::create(b, loc, gt, in[j], best);
      at = arith::SelectOp::create(b, loc, gt, i32(j), at);
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

void populateReduceToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                 RewritePatternSet &patterns) {
  addPattern<kiln::ReduceOp, &Emitter::emitReduce>(patterns, converter, state);
  addPattern<kiln::ArgMaxOp, &Emitter::emitArgMax>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
