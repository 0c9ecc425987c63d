//===- Context.cpp - MLIR contexts and diagnostics ------------------------===//
#include "TracedModule.h"

#include "kiln/Dialect/KilnDialect.h"
#include "kiln/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

namespace kiln {

std::unique_ptr<mlir::MLIRContext> makeKilnContext() {
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadDialect<KilnDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                   mlir::math::MathDialect, mlir::scf::SCFDialect, mlir::tensor::TensorDialect>();
  // A compile error is its message and location, not the whole kernel's IR
  // (CompileOptions::dump_dir and print_after_all show that).
  ctx->printOpOnDiagnostic(false);
  return ctx;
}

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext *ctx) : ctx_(ctx) {
  id_ = ctx->getDiagEngine().registerHandler([this](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(text_);
    os << d.getLocation() << ": " << d << "\n";
    for (auto &note : d.getNotes())
      os << "  note: " << note << "\n";
    return mlir::success();
  });
}
DiagnosticCollector::~DiagnosticCollector() { ctx_->getDiagEngine().eraseHandler(id_); }

} // namespace kiln
