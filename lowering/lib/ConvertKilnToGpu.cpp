//===- ConvertKilnToGpu.cpp - distribute kiln tiles over a CTA's threads --===//
//
// Rewrites each kiln kernel as a gpu.func whose body is scalar code run by
// every thread: a tile value becomes the list of elements this thread holds
// under the value's layout (see Passes.td). Data movement between layouts,
// general reductions and dot go through one shared-memory scratch buffer.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "GpuEmitter.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOGPU
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
using kiln::gpu_lowering::Emitter;

struct ConvertKilnToGpuPass : kiln::impl::ConvertKilnToGpuBase<ConvertKilnToGpuPass> {
  using ConvertKilnToGpuBase::ConvertKilnToGpuBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (numWarps < 1 || numWarps > 32) {
      module.emitError("num-warps must be in [1, 32], got ") << static_cast<int>(numWarps);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> kernels;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        kernels.push_back(f);
    if (kernels.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    OpBuilder b(ctx);
    for (func::FuncOp f : kernels) {
      Location loc = f.getLoc();
      b.setInsertionPoint(f);
      auto gpuModule = gpu::GPUModuleOp::create(b, loc, (f.getName() + "_module").str());
      b.setInsertionPointToStart(gpuModule.getBody());
      SmallVector<Type> args;
      for (Type t : f.getArgumentTypes())
        args.push_back(isa<kiln::PtrType>(t) ? Type(b.getI64Type()) : t);
      auto gpuFunc = gpu::GPUFuncOp::create(b, loc, f.getName(), FunctionType::get(ctx, args, {}));
      gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
      int threads = numWarps * 32;
      gpuFunc.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(ctx, {threads, 1, 1}));
      Emitter emitter(b, loc, threads, gpuModule);
      if (failed(emitter.run(f, gpuFunc)))
        return signalPassFailure();
      f.erase();
    }
  }
};

} // namespace
