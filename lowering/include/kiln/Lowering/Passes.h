//===- Passes.h - kiln lowering passes and pipelines ------------*- C++ -*-===//
#ifndef KILN_LOWERING_PASSES_H
#define KILN_LOWERING_PASSES_H

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Lowering/Passes.h.inc"

/// Type conversion of the CPU lowering: pointers (and tiles of them) become i64.
class CpuTypeConverter : public mlir::TypeConverter {
public:
  explicit CpuTypeConverter(mlir::MLIRContext *ctx);
};

/// kiln.addptr / kiln.load / kiln.store.
void populateMemoryToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);
/// kiln.make_range / splat / broadcast / expand_dims / reshape.
void populateShapeToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);
/// kiln.dot / reduce / argmax / cast / select.
void populateComputeToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);

/// Converts `x` (scalar or tile) to `dstType` with arith ops: float widths,
/// float <-> signed int, int widths (sign-extending), i1 as 0/1.
mlir::Value emitCast(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, mlir::Type dstType);
/// Loads an `elem` from integer address `addr` in `addrSpace`; where `mask`
/// (optional) is false nothing is read and the result is `fill` (zero if null).
mlir::Value emitMaskedLoad(mlir::OpBuilder &b, mlir::Location loc, mlir::Type elem, mlir::Value addr,
                           mlir::Value mask, mlir::Value fill, unsigned addrSpace);
/// Stores `value` at integer address `addr` in `addrSpace` unless `mask` (optional) is false.
void emitMaskedStore(mlir::OpBuilder &b, mlir::Location loc, mlir::Value addr, mlir::Value value,
                     mlir::Value mask, unsigned addrSpace);
/// The combining step of a reduction: add, maximum or minimum (NaN-propagating for floats).
mlir::Value emitCombine(mlir::OpBuilder &b, mlir::Location loc, ReduceKind kind, mlir::Value x,
                        mlir::Value y);

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
