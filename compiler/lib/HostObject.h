//===- HostObject.h - LLVM dialect to an object file for the host CPU -----===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kiln {

/// Translates `module` (MLIR's LLVM dialect) to LLVM IR, adds the packed
/// entry point `void _mlir_<name>(void **args)` of kernel `name`, optimises
/// at `optLevel` and returns the machine code for the host as an object
/// file; `llvmIR` receives the optimised LLVM IR. Throws Error on failure.
std::string emitHostObject(mlir::ModuleOp module, const std::string &name, int optLevel,
                           std::string &llvmIR);

} // namespace kiln
