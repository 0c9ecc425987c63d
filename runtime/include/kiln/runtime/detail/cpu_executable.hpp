//===- cpu_executable.hpp - a kernel JIT-compiled for the host CPU --------===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <span>
#include <string>

namespace mlir {
class ExecutionEngine;
}

namespace kiln {

/// A kernel in the LLVM dialect, compiled to host code with MLIR's execution
/// engine. A launch runs every program of the grid, spread over host threads.
class CpuExecutable {
public:
  /// `llvmIR` receives the optimized LLVM IR.
  CpuExecutable(mlir::ModuleOp module, const std::string &name, int optLevel,
                std::string &llvmIR);
  ~CpuExecutable();
  void launch(const Grid &grid, std::span<const Param> params,
              std::span<const KernelArg> args) const;

private:
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  void (*entry_)(void **) = nullptr;
};

} // namespace kiln
