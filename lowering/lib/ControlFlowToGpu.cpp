//===- ControlFlowToGpu.cpp - scf.for with carried tiles, program ids, return ===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

scf::ForOp Emitter::emitLoop(int64_t lb, int64_t ub, ValueRange inits,
                             function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return scf::ForOp::create(b, loc, i32(lb), i32(ub), i32(1), inits,
                            [&](OpBuilder &, Location, Value iv, ValueRange carried) {
                              scf::YieldOp::create(b, loc, body(iv, carried));
                            });
}

LogicalResult Emitter::emitProgramInfo(Operation *op) {
  Value v;
  if (auto pid = dyn_cast<kiln::ProgramIdOp>(op))
    v = gpu::BlockIdOp::create(b, loc, gpu::Dimension(pid.getAxis()));
  else
    v = gpu::GridDimOp::create(b, loc, gpu::Dimension(cast<kiln::NumProgramsOp>(op).getAxis()));
  values[op->getResult(0)] = {arith::IndexCastOp::create(b, loc, b.getI32Type(), v)};
  return success();
}

namespace {
/// func.return of the kernel, whose body now is the gpu.func's.
struct ReturnToGpu : OpConversionPattern<func::ReturnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(func::ReturnOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<gpu::ReturnOp>(op);
    return success();
  }
};
} // namespace

void populateControlFlowToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                      RewritePatternSet &patterns, ConversionTarget &target) {
  // A loop carries every element of its tiles (the iteration arguments'
  // converted types say which), even when the initial value is uniform (a
  // splat): iterations make them differ.
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
  patterns.add<ReturnToGpu>(converter, patterns.getContext());
  addPattern<kiln::ProgramIdOp, &Emitter::emitProgramInfo>(patterns, converter, state);
  addPattern<kiln::NumProgramsOp, &Emitter::emitProgramInfo>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
