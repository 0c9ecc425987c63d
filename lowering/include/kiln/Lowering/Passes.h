//===- Passes.h - kiln lowering passes and pipelines ------------*- C++ -*-===//
#ifndef KILN_LOWERING_PASSES_H
#define KILN_LOWERING_PASSES_H

// Only what the declarations below need: the generated pass declarations
// and registrations (mlir::Pass, mlir::registerPass), and names of the types
// the pipeline functions take. A file that defines a pass (GEN_PASS_DEF_*)
// includes the dialects of its dependentDialects itself; the CPU patterns
// and the per-element helpers are declared in lowering/lib/CpuPatterns.h and
// lowering/lib/ElementOps.h.
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>

namespace mlir {
class DialectRegistry;
class ModuleOp;
class OpPassManager;
} // namespace mlir

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Lowering/Passes.h.inc"

/// Everything from kiln (as traced) to the LLVM dialect, for the CPU JIT.
/// `kilnDone` / `loweredDone` are run on the module after those stages when set.
void buildCpuPipeline(mlir::OpPassManager &pm);
/// The kiln-level cleanup run before any target pipeline.
void buildKilnCleanupPipeline(mlir::OpPassManager &pm);
/// kiln (cleaned) -> standard dialects on tensors.
void buildCpuKilnToStandardPipeline(mlir::OpPassManager &pm);
/// Standard dialects on tensors -> LLVM dialect.
void buildCpuStandardToLLVMPipeline(mlir::OpPassManager &pm);

/// kiln (cleaned) -> gpu.module with scalar code per thread. With `tma`
/// (sm_90a only), dot operands that are blocks of a tensor are copied by TMA;
/// with `warpSpecialize` too, by a producer warp (kiln-warp-specialize),
/// in a `persistent` kernel when asked.
void buildGpuKilnToGpuPipeline(mlir::OpPassManager &pm, int numWarps, int numStages = 2,
                               const std::string &arch = "sm_80", bool tma = false,
                               bool warpSpecialize = false, bool persistent = false);
/// gpu.module -> NVVM / LLVM dialect.
void buildGpuToNVVMPipeline(mlir::OpPassManager &pm);
/// Serializes the (NVVM-lowered) gpu.module of `module` to PTX for `chip`
/// (sm_80, sm_90a, ...), linking libdevice from `cudaPath`. On failure returns
/// false and sets `error`.
bool translateToPtx(mlir::ModuleOp module, llvm::StringRef chip, llvm::StringRef cudaPath,
                    std::string &ptx, std::string &llvmIR, std::string &error);

/// Registers the kiln pipelines by name for kiln-opt (`--kiln-cpu-pipeline`, ...).
void registerKilnPipelines();

/// Every dialect (and LLVM IR translation) that kiln's pipelines need.
void registerKilnDialects(mlir::DialectRegistry &registry);

} // namespace kiln

#endif // KILN_LOWERING_PASSES_H
