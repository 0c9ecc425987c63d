//===- GpuEmitter.cpp - elements per thread, operands and results ---------===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln::gpu_lowering {

int64_t elementsPerThread(Type t, int threads) {
  auto tile = dyn_cast<RankedTensorType>(t);
  if (!tile)
    return 1;
  Attribute layout = tile.getEncoding();
  int64_t numel = tile.getNumElements();
  if (isa_and_nonnull<kiln::SharedLayoutAttr>(layout))
    return 1; // its byte offset in shared memory
  if (auto mma = dyn_cast_or_null<kiln::MmaLayoutAttr>(layout))
    return (tile.getDimSize(0) / mma.getWarpsM() / 16) * (tile.getDimSize(1) / mma.getWarpsN() / 8) * 4;
  if (auto slice = dyn_cast_or_null<kiln::SliceLayoutAttr>(layout)) {
    auto mma = cast<kiln::MmaLayoutAttr>(slice.getParent());
    if (slice.getDim() == 0) // the columns: 2 per 8-column tile
      return tile.getShape().back() / mma.getWarpsN() / 8 * 2;
    return tile.getDimSize(0) / mma.getWarpsM() / 16 * 2;
  }
  if (auto operand = dyn_cast_or_null<kiln::DotOperandLayoutAttr>(layout)) {
    // The A fragments of a product are the accumulator elements of the
    // product that computed them (see emitConvertLayout).
    auto mma = cast<kiln::MmaLayoutAttr>(operand.getParent());
    return (tile.getDimSize(0) / mma.getWarpsM() / 16) * (tile.getDimSize(1) / 8) * 4;
  }
  if (isa_and_nonnull<kiln::BlockedLayoutAttr>(layout))
    return numel / threads;
  return numel;
}

void lowerType(Type t, int threads, SmallVectorImpl<Type> &out) {
  MLIRContext *ctx = t.getContext();
  if (isa<kiln::SharedType>(t) || isa_and_nonnull<kiln::SharedLayoutAttr>(kiln::getLayout(t))) {
    out.push_back(IntegerType::get(ctx, 32)); // byte offset in shared memory
    return;
  }
  if (isa<kiln::TensorMapType>(t)) {
    out.push_back(LLVM::LLVMPointerType::get(ctx)); // the kernel parameter's address
    return;
  }
  Type elem = kiln::getElementTypeOrSelf(t);
  if (isa<kiln::PtrType>(elem))
    elem = IntegerType::get(ctx, 64);
  out.append(elementsPerThread(t, threads), elem);
}

LogicalResult Emitter::bindOperands(Operation *op, ArrayRef<ValueRange> operands) {
  // Tiles in shared memory are read by products (and viewed transposed, or
  // read into registers by a conversion), nothing else.
  if (!isa<kiln::DotOp, kiln::TransOp, kiln::ConvertLayoutOp>(op))
    for (Value v : op->getOperands())
      if (isa_and_nonnull<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType())))
        return op->emitError("convert-kiln-to-gpu: ")
               << op->getName() << " cannot read a tile in shared memory (" << v.getType() << ")";
  for (auto [source, converted] : llvm::zip(op->getOperands(), operands))
    if (!values.contains(source))
      values[source] = SmallVector<Value>(converted.begin(), converted.end());
  return success();
}

void Emitter::replace(Operation *op) {
  if (op->getNumResults() == 0) {
    b.eraseOp(op);
    return;
  }
  SmallVector<SmallVector<Value>> results;
  for (Value r : op->getResults()) {
    int64_t n = elementsPerThread(r.getType(), threads);
    auto it = values.find(r);
    SmallVector<Value> &out = results.emplace_back();
    if (it == values.end()) {
      // The lowering failed (and said why): poison keeps the IR typed.
      SmallVector<Type> types;
      lowerType(r.getType(), threads, types);
      for (Type t : types)
        out.push_back(LLVM::PoisonOp::create(b, loc, t));
      continue;
    }
    ArrayRef<Value> vs = it->second;
    assert((int64_t(vs.size()) == n || vs.size() == 1) && "lowered to the wrong element count");
    for (int64_t j = 0; j < n; ++j)
      out.push_back(pick(vs, j));
  }
  b.replaceOpWithMultiple(op, std::move(results));
}

// The helpers of GpuEmitter.h that emit LLVM dialect ops, defined here
// rather than inline in the header, so that the pattern files that emit none
// do not parse LLVMDialect.h.

Value Emitter::smemPtr(Value byteOffset) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value base = LLVM::AddressOfOp::create(b, loc, ptrType, kSmemName);
  return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base, ValueRange{byteOffset});
}

void Emitter::storeSmem(int64_t base, Value index, Value v) {
  Value x = v.getType().isInteger(1) ? Value(arith::ExtUIOp::create(b, loc, b.getI8Type(), v)) : v;
  LLVM::StoreOp::create(b, loc, x, smemAddr(base, index, x.getType()));
}

Value Emitter::loadSmem(int64_t base, Value index, Type elem) {
  Type stored = elem.isInteger(1) ? b.getI8Type() : elem;
  Value v = LLVM::LoadOp::create(b, loc, stored, smemAddr(base, index, stored));
  if (elem.isInteger(1))
    v = arith::TruncIOp::create(b, loc, elem, v);
  return v;
}

int64_t Emitter::spill(Value v, int64_t base, bool swizzle) {
  auto tile = cast<RankedTensorType>(v.getType());
  Type stored = storageType(tile.getElementType());
  int64_t bytes = tile.getNumElements() * std::max<int64_t>(byteSize(stored), 1);
  int64_t cols = tile.getShape().back();
  auto at = [&](Value row, Value col) -> Value {
    if (swizzle)
      return swizzled(row, col, tile.getDimSize(0), cols, byteSize(stored));
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, row, i32(cols)), col);
  };
  SmallVector<Value> own = raw(v);
  if (std::optional<Mma> acc = mmaOf(v); acc && own.size() > 1) {
    // Columns 2c and 2c + 1 of a row are one thread's: one store each pair.
    const Mma &m = *acc;
    bool pairs = stored.getIntOrFloatBitWidth() >= 8;
    for (int64_t j = 0; j < m.perThread(); j += 2) {
      auto [row, col] = mmaRowCol(m, j);
      Value index = at(row, col);
      if (!pairs) {
        storeSmem(base, index, own[j]);
        storeSmem(base, arith::AddIOp::create(b, loc, index, i32(1)), own[j + 1]);
        continue;
      }
      LLVM::StoreOp::create(b, loc, pack({own[j], own[j + 1]}), smemAddr(base, index, stored),
                            2 * byteSize(stored));
    }
    return bytes;
  }
  if (std::optional<Mma> rows = rowsOf(v), cols = colsOf(v); (rows || cols) && own.size() > 1) {
    // A slice: each row (column) by the one thread that owns it.
    const Mma &m = rows ? *rows : *cols;
    onlyIf(rows ? ownsRows(m) : ownsCols(m), [&] {
      for (int64_t i = 0, n = rows ? rowsPerThread(m) : colsPerThread(m); i < n; ++i)
        storeSmem(base, rows ? rowOf(m, i) : colOf(m, i), own[i]);
    });
    return bytes;
  }
  Layout l = layoutOf(tile);
  SmallVector<Value> vs = raw(v);
  int64_t width = vectorWidth(l, stored);
  auto index = [&](int64_t j) -> Value {
    Value flat = flatIndex(l, j);
    if (!swizzle)
      return flat;
    return swizzled(arith::DivUIOp::create(b, loc, flat, i32(cols)),
                    arith::RemUIOp::create(b, loc, flat, i32(cols)), tile.getDimSize(0), cols,
                    byteSize(stored));
  };
  for (int64_t j = 0; j < l.perThread; j += width) {
    if (width == 1) {
      storeSmem(base, index(j), pick(vs, j));
      continue;
    }
    SmallVector<Value> part;
    for (int64_t k = 0; k < width; ++k)
      part.push_back(pick(vs, j + k));
    Value vec = pack(part);
    LLVM::StoreOp::create(b, loc, vec, smemAddr(base, index(j), stored),
                          width * byteSize(stored));
  }
  return bytes;
}

int64_t Emitter::copyTransposed(kiln::LocalLoadOp ll, int64_t base) {
  auto tile = cast<RankedTensorType>(ll.getType());
  int64_t rows = tile.getDimSize(0), cols = tile.getDimSize(1);
  int64_t quads = rows / 4 * cols;
  if (!tile.getElementType().isF32() || rows % 4 != 0 || quads % threads != 0 || !keepsSwizzled(tile))
    return 0;
  SmemTile from{ringBuffer(ll.getRing(), raw(ll.getStage())[0]), tile, true};
  Type f32 = b.getF32Type();
  for (int64_t i = 0; i < quads / threads; ++i) {
    Value q = arith::AddIOp::create(b, loc, tid, i32(i * threads));
    Value col = arith::RemUIOp::create(b, loc, q, i32(cols));
    Value row = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, q, i32(cols)), i32(4));
    SmallVector<Value> quad;
    for (int64_t k = 0; k < 4; ++k) {
      Value r = arith::AddIOp::create(b, loc, row, i32(k));
      quad.push_back(LLVM::LoadOp::create(b, loc, f32, tileAddr(from, tileIndex(from, r, col))));
    }
    // Four consecutive elements of a transposed row: one swizzled chunk.
    Value to = swizzled(col, row, cols, rows, 4);
    LLVM::StoreOp::create(b, loc, pack(quad), smemAddr(base, to, f32), 16);
  }
  return tile.getNumElements() * 4;
}

Value Emitter::pack(ArrayRef<Value> elems) {
  auto type = VectorType::get({int64_t(elems.size())}, elems[0].getType());
  Value v = LLVM::UndefOp::create(b, loc, type);
  for (auto [i, e] : llvm::enumerate(elems))
    v = LLVM::InsertElementOp::create(b, loc, v, e, i32(i));
  return v;
}

SmallVector<Value> Emitter::unpack(Value vec, int64_t n) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(LLVM::ExtractElementOp::create(b, loc, vec, i32(i)));
  return out;
}

} // namespace kiln::gpu_lowering
