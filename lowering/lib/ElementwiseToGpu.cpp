//===- ElementwiseToGpu.cpp - constants and element-wise ops per thread ---===//
#include "GpuEmitter.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitConstant(arith::ConstantOp c) {
  if (auto splat = dyn_cast<SplatElementsAttr>(c.getValue())) {
    values[c] = {arith::ConstantOp::create(b, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()))};
    return success();
  }
  if (isa<RankedTensorType>(c.getType()))
    return c.emitError("convert-kiln-to-gpu: only splat tile constants are supported");
  values[c] = {b.clone(*c)->getResult(0)};
  return success();
}

LogicalResult Emitter::emitElementwise(Operation *op) {
  if (op->getNumResults() != 1)
    return op->emitError("convert-kiln-to-gpu: expected one result");
  Value result = op->getResult(0);
  Type elemType = kiln::getElementTypeOrSelf(result.getType());
  // Every operand has the result's layout (the layout passes made it so).
  SmallVector<SmallVector<Value>> operands;
  for (Value v : op->getOperands())
    operands.push_back(raw(v));
  int64_t n = perThreadOf(result.getType());
  if (llvm::all_of(operands, [](auto &vs) { return vs.size() == 1; }))
    n = 1; // uniform operands (splats): one value serves every element
  SmallVector<Value> out;
  for (int64_t j = 0; j < n; ++j) {
    if (auto sel = dyn_cast<kiln::SelectOp>(op)) {
      out.push_back(arith::SelectOp::create(b, loc, pick(operands[0], j), pick(operands[1], j),
                                            pick(operands[2], j)));
      continue;
    }
    if (isa<kiln::CastOp>(op)) {
      out.push_back(kiln::emitCast(b, loc, pick(operands[0], j), elemType));
      continue;
    }
    OperationState state(loc, op->getName());
    for (auto &vs : operands)
      state.addOperands(pick(vs, j));
    state.addTypes(elemType);
    state.addAttributes(op->getAttrs());
    out.push_back(b.create(state)->getResult(0));
  }
  values[result] = out;
  return success();
}

} // namespace kiln::gpu_lowering
