//===- GpuPipeline.cpp - a gpu.module in NVVM -> PTX ----------------------===//
//
// The passes that lower kiln IR to a gpu.module in NVVM are assembled in
// Pipelines.cpp; this file translates the result to PTX.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

bool kiln::translateToPtx(ModuleOp module, StringRef chip, StringRef cudaPath, std::string &ptx,
                          std::string &llvmIR, std::string &error) {
  gpu::GPUModuleOp gpuModule;
  module.walk([&](gpu::GPUModuleOp m) { gpuModule = m; });
  if (!gpuModule) {
    error = "no gpu.module to translate";
    return false;
  }
  // Multiplies and adds may contract into fma (as in CUDA C++ and Triton by
  // default): one rounding instead of two, and half the instructions of a
  // dot product.
  gpuModule.walk([](LLVM::FastmathFlagsInterface op) {
    auto flags = op.getFastmathAttr() ? op.getFastmathAttr().getValue() : LLVM::FastmathFlags::none;
    op->setAttr(op.getFastmathAttrName(),
                LLVM::FastmathFlagsAttr::get(op->getContext(), flags | LLVM::FastmathFlags::contract));
  });
  // Tensor maps are passed by value and read in place (__grid_constant__):
  // TMA takes the parameter's own address.
  gpuModule.walk([](LLVM::LLVMFuncOp f) {
    if (auto regs = f->getAttrOfType<IntegerAttr>("kiln.maxnreg")) {
      f->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(), regs);
      f->removeAttr("kiln.maxnreg");
    }
    if (auto cluster = f->getAttrOfType<IntegerAttr>("kiln.cluster_dim")) {
      // .reqnctapercluster: launched in clusters of that many programs along x.
      f->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                 DenseI32ArrayAttr::get(f.getContext(), {int32_t(cluster.getInt()), 1, 1}));
      f->removeAttr("kiln.cluster_dim");
    }
    auto args = f->getAttrOfType<DenseI32ArrayAttr>("kiln.tensormap_args");
    if (!args)
      return;
    MLIRContext *ctx = f.getContext();
    Builder b(ctx);
    for (int32_t i : args.asArrayRef()) {
      f.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                   TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
      f.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
      f.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), UnitAttr::get(ctx));
    }
    f->removeAttr("kiln.tensormap_args");
  });
  auto target = NVVM::NVVMTargetAttr::get(module.getContext(), /*optLevel=*/3,
                                          "nvptx64-nvidia-cuda", chip, /*features=*/"");
  auto keepIR = [&](llvm::Module &m) {
    llvm::raw_string_ostream os(llvmIR);
    m.print(os, nullptr);
  };
  gpu::TargetOptions options(cudaPath, {}, "", "", gpu::CompilationTarget::Assembly, {}, {}, {},
                             keepIR);
  auto object = cast<gpu::TargetAttrInterface>(Attribute(target))
                    .serializeToObject(gpuModule, options);
  if (!object) {
    error = "NVPTX code generation failed for " + chip.str();
    return false;
  }
  ptx.assign(object->begin(), object->end());
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  return true;
}
