//===- ConvertLayoutToGpu.cpp - kiln.convert_layout: moving tiles between layouts ===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitConvertLayout(kiln::ConvertLayoutOp op) {
  Value src = op.getSrc(), dst = op.getResult();
  Attribute from = kiln::getLayout(src.getType()), to = kiln::getLayout(dst.getType());
  // A tile for a product to read from shared memory: the product stages it
  // (see operandTile), in the scratch area it uses for its operands, so the
  // conversion itself has no offset yet.
  if (isa<kiln::SharedLayoutAttr>(to)) {
    values[dst] = {LLVM::PoisonOp::create(b, loc, b.getI32Type())};
    return success();
  }
  if (isa<kiln::SharedLayoutAttr>(from)) {
    // A ring buffer read into registers.
    auto ll = src.getDefiningOp<kiln::LocalLoadOp>();
    if (!ll || mmaOf(dst) || inSlice(dst.getType()))
      return op.emitError("convert-kiln-to-gpu: only ring buffers are read from shared memory into "
                          "a #kiln.blocked or #kiln.replicated layout");
    SmemTile tile = ringTile(ll);
    Layout l = layoutOf(dst.getType());
    Type elemType = storageType(tile.type.getElementType());
    auto &out = values[dst];
    for (int64_t j = 0; j < l.perThread; ++j)
      out.push_back(LLVM::LoadOp::create(b, loc, elemType, tileAddr(tile, tileIndex(tile, flatIndex(l, j)))));
    return success();
  }
  if (auto operand = dyn_cast<kiln::DotOperandLayoutAttr>(to)) {
    // An accumulator whose warps hold whole rows is the A fragment of a
    // product with the same row split: nothing moves.
    std::optional<Mma> acc = mmaOf(src);
    auto parent = cast<kiln::MmaLayoutAttr>(operand.getParent());
    if (!acc || acc->wn != 1 || acc->wm != parent.getWarpsM())
      return op.emitError("convert-kiln-to-gpu: an A operand in registers must come from an "
                          "accumulator with the same warps on rows and one on columns");
    values[dst] = raw(src);
    return success();
  }
  if (isUniform(src)) {
    values[dst] = raw(src);
    return success();
  }
  if (std::optional<Mma> m = mmaOf(dst))
    values[dst] = toMma(src, *m);
  else if (std::optional<Mma> rows = rowsOf(dst))
    values[dst] = toRows(src, *rows);
  else if (std::optional<Mma> cols = colsOf(dst))
    values[dst] = toCols(src, *cols);
  else if (mmaOf(src) || inSlice(src.getType()))
    values[dst] = toDefault(src, dst.getType());
  else if (layoutOf(src.getType()).perThread == layoutOf(dst.getType()).perThread &&
           layoutOf(src.getType()).distributed == layoutOf(dst.getType()).distributed &&
           layoutOf(src.getType()).vec == layoutOf(dst.getType()).vec)
    values[dst] = raw(src);
  else
    return op.emitError("convert-kiln-to-gpu: unsupported conversion from ") << from << " to " << to;
  return success();
}

SmallVector<Value> Emitter::toSlice(Value v, int64_t slots, bool alongColumns,
                                    function_ref<Value(int64_t)> at) {
  if (isUniform(v))
    return raw(v);
  SmallVector<Value> out;
  auto tile = cast<RankedTensorType>(v.getType());
  auto index = [&](int64_t i) {
    SmallVector<Value> idx(tile.getRank(), i32(0));
    idx[alongColumns ? tile.getRank() - 1 : 0] = at(i);
    return idx;
  };
  if (canRematerialize(v, 0)) {
    for (int64_t i = 0; i < slots; ++i)
      out.push_back(rematerialize(v, index(i)));
    return out;
  }
  Type stored = storageType(tile.getElementType());
  reserveSmem(spill(v, 0));
  barrier();
  for (int64_t i = 0; i < slots; ++i)
    out.push_back(loadSmem(0, at(i), stored));
  barrier();
  return out;
}

SmallVector<Value> Emitter::toRows(Value v, const Mma &m) {
  if (std::optional<Mma> rows = rowsOf(v); rows && sameRows(*rows, m))
    return raw(v);
  return toSlice(v, rowsPerThread(m), /*alongColumns=*/false, [&](int64_t i) { return rowOf(m, i); });
}

SmallVector<Value> Emitter::toCols(Value v, const Mma &m) {
  if (std::optional<Mma> cols = colsOf(v); cols && sameCols(*cols, m))
    return raw(v);
  return toSlice(v, colsPerThread(m), /*alongColumns=*/true, [&](int64_t i) { return colOf(m, i); });
}

SmallVector<Value> Emitter::toDefault(Value v, Type to) {
  auto tile = cast<RankedTensorType>(v.getType());
  Type stored = storageType(tile.getElementType());
  reserveSmem(spill(v, 0));
  barrier();
  Layout l = layoutOf(to);
  SmallVector<Value> out;
  for (int64_t j = 0; j < l.perThread; ++j)
    out.push_back(loadSmem(0, flatIndex(l, j), stored));
  barrier();
  return out;
}

bool Emitter::canRematerialize(Value v, int depth) {
  if (depth > 16)
    return false;
  auto it = values.find(v);
  if (it != values.end() && isUniform(v))
    return true;
  Operation *op = v.getDefiningOp();
  if (!op || mmaOf(v) || inSlice(v.getType()))
    return false;
  if (isa<kiln::MakeRangeOp>(op))
    return true;
  if (auto s = dyn_cast<kiln::SplatOp>(op))
    return raw(s.getSrc()).size() == 1;
  if (isa<kiln::ExpandDimsOp, kiln::BroadcastOp, kiln::AddPtrOp>(op) ||
      (op->getDialect() && op->getDialect()->getNamespace() == "arith" &&
       op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 &&
       isa<IntegerType, kiln::PtrType>(kiln::getElementTypeOrSelf(op->getResult(0).getType())))) {
    for (Value operand : op->getOperands())
      if (isa<RankedTensorType>(operand.getType()) ? !canRematerialize(operand, depth + 1)
                                                    : raw(operand).size() != 1)
        return false;
    return true;
  }
  return false;
}

Value Emitter::rematerialize(Value v, ArrayRef<Value> idx) {
  auto it = values.find(v);
  if (it != values.end() && isUniform(v))
    return it->second[0];
  Operation *op = v.getDefiningOp();
  if (auto r = dyn_cast<kiln::MakeRangeOp>(op))
    return arith::AddIOp::create(b, loc, idx[0], i32(r.getStart()));
  if (auto s = dyn_cast<kiln::SplatOp>(op))
    return raw(s.getSrc())[0];
  if (auto e = dyn_cast<kiln::ExpandDimsOp>(op)) {
    SmallVector<Value> inner(idx);
    inner.erase(inner.begin() + e.getAxis());
    return rematerialize(e.getSrc(), inner);
  }
  if (auto bc = dyn_cast<kiln::BroadcastOp>(op)) {
    SmallVector<Value> inner(idx);
    auto src = bc.getSrc().getType();
    for (int64_t d = 0; d < src.getRank(); ++d)
      if (src.getDimSize(d) == 1)
        inner[d] = i32(0);
    return rematerialize(bc.getSrc(), inner);
  }
  auto at = [&](Value operand) {
    return isa<RankedTensorType>(operand.getType()) ? rematerialize(operand, idx) : raw(operand)[0];
  };
  if (auto ap = dyn_cast<kiln::AddPtrOp>(op)) {
    Type pointee = cast<kiln::PtrType>(kiln::getElementTypeOrSelf(ap.getType())).getPointeeType();
    Value off = at(ap.getOffset());
    if (off.getType().getIntOrFloatBitWidth() < 64)
      off = arith::ExtSIOp::create(b, loc, b.getI64Type(), off);
    Value bytes = arith::MulIOp::create(b, loc, off,
                                        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(byteSize(pointee))));
    return arith::AddIOp::create(b, loc, at(ap.getPtr()), bytes);
  }
  // An elementwise arith op, on scalars.
  OperationState state(loc, op->getName());
  for (Value operand : op->getOperands())
    state.addOperands(at(operand));
  state.addTypes(storageType(kiln::getElementTypeOrSelf(v.getType())));
  state.addAttributes(op->getAttrs());
  return b.create(state)->getResult(0);
}

SmallVector<Value> Emitter::toMma(Value v, const Mma &m) {
  if (mmaOf(v) == m)
    return raw(v);
  auto bc = v.getDefiningOp<kiln::BroadcastOp>();
  SmallVector<Value> in = raw(v);
  if (in.size() == 1)
    return in;
  SmallVector<Value> out;
  if (canRematerialize(v, 0)) {
    // Index arithmetic (masks, offsets) is recomputed at each element.
    for (int64_t j = 0; j < m.perThread(); ++j) {
      auto [row, col] = mmaRowCol(m, j);
      out.push_back(rematerialize(v, {row, col}));
    }
    return out;
  }
  auto tile = cast<RankedTensorType>(v.getType());
  Type stored = storageType(tile.getElementType());
  if (bc) {
    // Gather from the (smaller) source of a broadcast, e.g. a bias row.
    auto src = bc.getSrc().getType();
    if (isUniform(bc.getSrc()))
      return raw(bc.getSrc());
    reserveSmem(spill(bc.getSrc(), 0));
    barrier();
    for (int64_t j = 0; j < m.perThread(); ++j) {
      auto [row, col] = mmaRowCol(m, j);
      SmallVector<Value> idx{row, col};
      for (int64_t d = 0; d < tile.getRank(); ++d)
        if (src.getDimSize(d) == 1)
          idx[d] = i32(0);
      out.push_back(loadSmem(0, ravel(idx, src.getShape()), stored));
    }
    barrier();
    return out;
  }
  reserveSmem(spill(v, 0));
  barrier();
  for (int64_t j = 0; j < m.perThread(); ++j)
    out.push_back(loadSmem(0, mmaFlat(m, j), stored));
  barrier();
  return out;
}

void populateConvertLayoutToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                        RewritePatternSet &patterns) {
  addPattern<kiln::ConvertLayoutOp, &Emitter::emitConvertLayout>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
