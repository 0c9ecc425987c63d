//===- AxisInfo.cpp - contiguity of tiles along their last dimension -------===//
#include "AxisInfo.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

bool kiln::isElementwise(Operation *op) {
  if (isa<SelectOp, CastOp>(op))
    return true;
  return isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) && op->getNumResults() == 1 &&
         !isa<arith::ConstantOp>(op);
}

namespace kiln {

AxisInfo::AxisInfo(func::FuncOp kernel) {
  kernel.walk([&](Operation *op) { visit(op); });
}

std::optional<int64_t> AxisInfo::stride(Value v) const {
  if (isUniform(v))
    return 0;
  auto it = strides.find(v);
  if (it == strides.end())
    return std::nullopt;
  return it->second;
}

void AxisInfo::set(Value v, std::optional<int64_t> s) {
  if (s && (*s == 0 || *s == 1))
    strides[v] = *s;
}

void AxisInfo::inherit(Value dst, Value src) {
  set(dst, stride(src));
  if (isPrefixMask(src))
    prefix.insert(dst);
}

void AxisInfo::visit(Operation *op) {
  if (op->getNumResults() != 1)
    return;
  Value r = op->getResult(0);
  DenseElementsAttr dense;
  if (isa<SplatOp>(op) || (matchPattern(op, m_Constant(&dense)) && dense.isSplat()) ||
      ((isa<BroadcastOp, ExpandDimsOp, ReshapeOp, TransOp, ConvertLayoutOp, AddPtrOp>(op) ||
        kiln::isElementwise(op)) &&
       llvm::all_of(op->getOperands(), [&](Value x) { return isUniform(x); })))
    uniform.insert(r);
  auto lastDim = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape().back(); };
  if (isa<MakeRangeOp>(op)) {
    strides[r] = 1;
  } else if (isa<SplatOp>(op) || (isa<arith::ConstantOp>(op) && isUniform(r))) {
    strides[r] = 0;
  } else if (auto ap = dyn_cast<AddPtrOp>(op)) {
    // A uniform base plus offsets: the offsets' stride.
    if (stride(ap.getPtr()) == 0)
      set(r, stride(ap.getOffset()));
  } else if (isa<ExpandDimsOp, ReshapeOp>(op)) {
    if (isa<RankedTensorType>(r.getType()) && lastDim(op->getOperand(0)) == lastDim(r))
      inherit(r, op->getOperand(0));
  } else if (auto bc = dyn_cast<BroadcastOp>(op)) {
    if (lastDim(bc.getSrc()) == 1 && lastDim(r) != 1)
      strides[r] = 0;
    else
      inherit(r, bc.getSrc());
  } else if (auto cvt = dyn_cast<ConvertLayoutOp>(op)) {
    inherit(r, cvt.getSrc());
  } else if (kiln::isElementwise(op)) {
    set(r, elementwise(op));
    notePrefix(op);
  }
}

std::optional<int64_t> AxisInfo::elementwise(Operation *op) const {
  if (llvm::all_of(op->getOperands(), [&](Value v) { return stride(v) == 0; }))
    return 0;
  auto sa = op->getNumOperands() > 0 ? stride(op->getOperand(0)) : std::nullopt;
  auto sb = op->getNumOperands() > 1 ? stride(op->getOperand(1)) : std::nullopt;
  if (!sa || !sb)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return *sa + *sb;
  if (isa<arith::SubIOp>(op))
    return *sa - *sb;
  if (isa<arith::MulIOp>(op)) {
    // x * 1 keeps x's stride.
    for (int i = 0; i < 2; ++i) {
      APInt c;
      if (stride(op->getOperand(1 - i)) == 0 && matchPattern(op->getOperand(1 - i), m_ConstantInt(&c)) &&
          c.isOne())
        return i == 0 ? sa : sb;
    }
  }
  if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::IndexCastOp>(op))
    return sa;
  return std::nullopt;
}

void AxisInfo::notePrefix(Operation *op) {
  Value r = op->getResult(0);
  auto prefixOrUniform = [&](Value v) { return isPrefixMask(v) || stride(v) == 0; };
  if (isa<arith::AndIOp>(op) && llvm::any_of(op->getOperands(), [&](Value v) { return isPrefixMask(v); }) &&
      llvm::all_of(op->getOperands(), prefixOrUniform)) {
    prefix.insert(r);
    return;
  }
  auto cmp = dyn_cast<arith::CmpIOp>(op);
  if (!cmp)
    return;
  auto lhs = stride(cmp.getLhs()), rhs = stride(cmp.getRhs());
  using P = arith::CmpIPredicate;
  P p = cmp.getPredicate();
  bool below = p == P::slt || p == P::ult || p == P::sle || p == P::ule;
  bool above = p == P::sgt || p == P::ugt || p == P::sge || p == P::uge;
  if ((below && lhs == 1 && rhs == 0) || (above && lhs == 0 && rhs == 1))
    prefix.insert(r);
}

} // namespace kiln
