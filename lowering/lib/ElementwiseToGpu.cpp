//===- ElementwiseToGpu.cpp - constants and element-wise ops per thread ---===//
#include "GpuEmitter.h"

#include "ElementOps.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitConstant(arith::ConstantOp c) {
  if (auto splat = dyn_cast<SplatElementsAttr>(c.getValue())) {
    values[c] = {arith::ConstantOp::create(b, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()))};
    return success();
  }
  if (isa<RankedTensorType>(c.getType()))
    return c.emitError("convert-kiln-to-gpu: only splat tile constants are supported");
  return c.emitError("convert-kiln-to-gpu: a scalar constant is legal as it is");
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
    if (auto tanh = dyn_cast<math::TanhOp>(op);
        tanh && elemType.isF32() && bitEnumContainsAll(tanh.getFastmath(), arith::FastMathFlags::afn)) {
      // An approximation is enough: the special-function unit's.
      out.push_back(LLVM::InlineAsmOp::create(b, loc, elemType, ValueRange{pick(operands[0], j)},
                                              "tanh.approx.f32 $0, $1;", "=f,f", /*has_side_effects=*/false,
                                              /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                              LLVM::AsmDialectAttr(), ArrayAttr())
                        .getResult(0));
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

namespace {
/// arith and math ops on tiles: one op per element (one in all for uniform
/// operands). The same ops on scalars are legal as they are.
struct ArithOnTiles : ConversionPattern {
  ArithOnTiles(const TypeConverter &converter, LoweringState &state)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, state.module->getContext()),
        state(state) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<ValueRange> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        getTypeConverter()->isLegal(op))
      return failure();
    Emitter emitter(rewriter, op, state);
    if (failed(emitter.bindOperands(op, operands)) ||
        failed(isa<arith::ConstantOp>(op) ? emitter.emitConstant(cast<arith::ConstantOp>(op))
                                          : emitter.emitElementwise(op)))
      state.failed = true;
    emitter.replace(op);
    return success();
  }
  LoweringState &state;
};
} // namespace

void populateElementwiseToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                      RewritePatternSet &patterns) {
  patterns.add<ArithOnTiles>(converter, state);
  addPattern<kiln::SelectOp, &Emitter::emitElementwise>(patterns, converter, state);
  addPattern<kiln::CastOp, &Emitter::emitElementwise>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
