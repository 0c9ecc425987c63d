//===- ElementOps.cpp - per-element helpers shared by the backends ---------===//
#include "ElementOps.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

Value kiln::emitCast(OpBuilder &b, Location loc, Value x, Type dstType) {
  Type from = kiln::getElementTypeOrSelf(x.getType());
  Type to = kiln::getElementTypeOrSelf(dstType);
  auto shaped = [&](Type elem) { return kiln::getSameShape(dstType, elem); };
  auto zero = [&](Type elem) -> Value {
    TypedAttr z = b.getZeroAttr(elem);
    if (auto t = dyn_cast<RankedTensorType>(dstType))
      z = SplatElementsAttr::get(RankedTensorType::get(t.getShape(), elem), z);
    return arith::ConstantOp::create(b, loc, z);
  };
  Value result;
  auto ff = dyn_cast<FloatType>(from);
  auto ft = dyn_cast<FloatType>(to);
  if (ff && ft) {
    if (ff.getWidth() == ft.getWidth()) { // f16 <-> bf16 through f32
      Value wide = arith::ExtFOp::create(b, loc, shaped(b.getF32Type()), x);
      result = arith::TruncFOp::create(b, loc, dstType, wide);
    } else if (ff.getWidth() < ft.getWidth()) {
      result = arith::ExtFOp::create(b, loc, dstType, x);
    } else {
      result = arith::TruncFOp::create(b, loc, dstType, x);
    }
  } else if (ff) { // float -> int
    if (to.isInteger(1))
      result = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, x, zero(from));
    else
      result = arith::FPToSIOp::create(b, loc, dstType, x);
  } else if (ft) { // int -> float
    if (from.isInteger(1))
      result = arith::UIToFPOp::create(b, loc, dstType, x);
    else
      result = arith::SIToFPOp::create(b, loc, dstType, x);
  } else { // int -> int
    unsigned wf = from.getIntOrFloatBitWidth(), wt = to.getIntOrFloatBitWidth();
    if (wt == 1)
      result = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x, zero(from));
    else if (wf == 1)
      result = arith::ExtUIOp::create(b, loc, dstType, x);
    else if (wf < wt)
      result = arith::ExtSIOp::create(b, loc, dstType, x);
    else if (wf > wt)
      result = arith::TruncIOp::create(b, loc, dstType, x);
    else
      result = x;
  }
  return result;
}

Value kiln::emitCombine(OpBuilder &b, Location loc, ReduceKind kind, Value x, Value y) {
  bool fp = isa<FloatType>(kiln::getElementTypeOrSelf(x.getType()));
  switch (kind) {
  case ReduceKind::Sum:
    return fp ? Value(arith::AddFOp::create(b, loc, x, y)) : Value(arith::AddIOp::create(b, loc, x, y));
  case ReduceKind::Max:
    return fp ? Value(arith::MaximumFOp::create(b, loc, x, y)) : Value(arith::MaxSIOp::create(b, loc, x, y));
  case ReduceKind::Min:
    return fp ? Value(arith::MinimumFOp::create(b, loc, x, y)) : Value(arith::MinSIOp::create(b, loc, x, y));
  }
  llvm_unreachable("unknown reduce kind");
}

namespace {
int64_t accessBytes(Type t) { return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8); }
} // namespace

Value kiln::emitMaskedLoad(OpBuilder &b, Location loc, Type elem, Value addr, Value mask,
                           Value fill, unsigned addrSpace) {
  auto emitLoad = [&](OpBuilder &bb, Location l) -> Value {
    Value p = LLVM::IntToPtrOp::create(bb, l, LLVM::LLVMPointerType::get(bb.getContext(), addrSpace), addr);
    return LLVM::LoadOp::create(bb, l, elem, p, accessBytes(elem));
  };
  if (!mask)
    return emitLoad(b, loc);
  if (!fill)
    fill = arith::ConstantOp::create(b, loc, b.getZeroAttr(elem));
  auto ifOp = scf::IfOp::create(
      b, loc, mask, [&](OpBuilder &bb, Location l) { scf::YieldOp::create(bb, l, emitLoad(bb, l)); },
      [&](OpBuilder &bb, Location l) { scf::YieldOp::create(bb, l, fill); });
  return ifOp.getResult(0);
}

void kiln::emitMaskedStore(OpBuilder &b, Location loc, Value addr, Value value, Value mask,
                           unsigned addrSpace) {
  auto emitStore = [&](OpBuilder &bb, Location l) {
    Value p = LLVM::IntToPtrOp::create(bb, l, LLVM::LLVMPointerType::get(bb.getContext(), addrSpace), addr);
    LLVM::StoreOp::create(bb, l, value, p, accessBytes(value.getType()));
  };
  if (!mask)
    return emitStore(b, loc);
  auto ifOp = scf::IfOp::create(b, loc, mask, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  emitStore(b, loc);
}
