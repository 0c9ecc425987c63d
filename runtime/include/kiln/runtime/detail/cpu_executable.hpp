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
namespace llvm::orc {
class LLJIT;
}

namespace kiln {

/// A kernel in the LLVM dialect, compiled to host code with MLIR's execution
/// engine. A launch runs every program of the grid, spread over host threads.
class CpuExecutable {
public:
  /// `llvmIR` receives the optimized LLVM IR and, when given, `object` the
  /// machine code as an object file (for the kernel cache).
  CpuExecutable(mlir::ModuleOp module, const std::string &name, int optLevel,
                std::string &llvmIR, std::string *object = nullptr);
  /// Links the object file of an earlier compilation of kernel `name`.
  CpuExecutable(const std::string &object, const std::string &name);
  ~CpuExecutable();
  /// The host CPU and its features: machine code is only reused on a host
  /// that has them.
  static std::string host();
  void launch(const Grid &grid, std::span<const Param> params,
              std::span<const KernelArg> args) const;

private:
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  void (*entry_)(void **) = nullptr;
};

} // namespace kiln
