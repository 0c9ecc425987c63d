//===- ConvertKilnToCpu.cpp - the kiln -> standard dialects pass ----------===//
#include "kiln/Lowering/Passes.h"

#include "CpuPatterns.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOCPU
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct ConvertKilnToCpuPass : kiln::impl::ConvertKilnToCpuBase<ConvertKilnToCpuPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ModuleOp module = getOperation();
    bool hasGridOps = false;
    module.walk([&](Operation *op) {
      if (isa<kiln::ProgramIdOp, kiln::NumProgramsOp>(op)) {
        op->emitError("kiln.program_id / kiln.num_programs must be lowered by "
                      "-kiln-cpu-grid-args before -convert-kiln-to-cpu");
        hasGridOps = true;
      }
    });
    if (hasGridOps)
      return signalPassFailure();

    kiln::CpuTypeConverter converter(ctx);
    ConversionTarget target(*ctx);
    target.addIllegalDialect<kiln::KilnDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect, tensor::TensorDialect,
                           scf::SCFDialect, LLVM::LLVMDialect, math::MathDialect>();
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp f) {
      return converter.isSignatureLegal(f.getFunctionType()) &&
             converter.isLegal(&f.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return converter.isLegal(op); });
    target.markUnknownOpDynamicallyLegal([&](Operation *op) { return converter.isLegal(op); });

    RewritePatternSet patterns(ctx);
    kiln::populateMemoryToCpuPatterns(converter, patterns);
    kiln::populateShapeToCpuPatterns(converter, patterns);
    kiln::populateComputeToCpuPatterns(converter, patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
