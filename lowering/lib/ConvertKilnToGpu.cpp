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

/// Limits checked before any code is emitted, so that a tile too large for
/// a CTA fails in milliseconds with a message instead of emitting millions
/// of instructions. A thread holds numel / threads elements of a tile whose
/// size divides among the threads, and all of it otherwise (replicated).
constexpr int64_t kMaxElementsPerThread = 1024;
/// The sum over every tile value of the elements a thread holds: a bound on
/// the code emitted (the library's largest kernels stay under 1/10 of it).
constexpr int64_t kMaxEmittedElements = 1 << 18;

LogicalResult checkResources(func::FuncOp f, int threads) {
  int64_t total = 0;
  WalkResult walk = f.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (!tile || !tile.hasStaticShape())
        continue;
      int64_t numel = tile.getNumElements();
      int64_t perThread = numel % threads == 0 ? numel / threads : numel;
      if (perThread > kMaxElementsPerThread) {
        op->emitError("convert-kiln-to-gpu: the tile ")
            << tile << " of " << op->getName() << " would put " << perThread
            << " elements in each of the " << threads << " threads (at most "
            << kMaxElementsPerThread
            << "): use smaller blocks, or blocks whose element count is a multiple of the "
               "thread count";
        return WalkResult::interrupt();
      }
      total += perThread;
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (total > kMaxEmittedElements)
    return f.emitError("convert-kiln-to-gpu: kernel '")
           << f.getName() << "' holds " << total
           << " tile elements per thread over all its values (at most " << kMaxEmittedElements
           << "); use smaller blocks";
  return success();
}

/// Every tile has the layout the layout passes chose, for this many warps.
LogicalResult checkLayouts(func::FuncOp f, int warps) {
  WalkResult walk = f.walk([&](Operation *op) {
    auto check = [&](Value v) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (!tile)
        return true;
      kiln::LayoutAttr layout = kiln::getLayout(tile);
      if (!layout) {
        op->emitError("convert-kiln-to-gpu: the tile ")
            << tile << " has no layout; run kiln-coalesce (and the other layout passes) first";
        return false;
      }
      if (layout.getNumWarps() != warps) {
        op->emitError("convert-kiln-to-gpu: the layout of ")
            << tile << " is for " << layout.getNumWarps() << " warps, not " << warps;
        return false;
      }
      return true;
    };
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (!check(arg))
            return WalkResult::interrupt();
    for (Value r : op->getResults())
      if (!check(r))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

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
    for (func::FuncOp f : kernels)
      if (failed(checkLayouts(f, numWarps)) || failed(checkResources(f, numWarps * 32)))
        return signalPassFailure();
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
