//===- GpuEmitter.cpp - elements per thread, operands and results ---------===//
#include "GpuEmitter.h"

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

} // namespace kiln::gpu_lowering
