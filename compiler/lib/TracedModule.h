//===- TracedModule.h - a traced kernel: MLIR context + kiln module -------===//
//
// Internal to the compiler: shared by the tracer (Emit.cpp) and the driver
// (Compiler.cpp). Everyone else holds a kiln::TracedModulePtr.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/param.hpp"
#include "kiln/core/traced_module.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class TracedModule {
public:
  /// Shared by the copies of a kernel (see compiler::copy).
  std::shared_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string name;
  std::vector<Param> params;
};

/// A context with every dialect and translation kiln's pipelines use.
std::unique_ptr<mlir::MLIRContext> makeKilnContext();

/// Collects diagnostics emitted while alive into one message.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *ctx);
  ~DiagnosticCollector();
  std::string str() const { return text_; }

private:
  mlir::MLIRContext *ctx_;
  uint64_t id_;
  std::string text_;
};

} // namespace kiln
