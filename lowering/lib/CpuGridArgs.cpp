//===- CpuGridArgs.cpp - program ids as kernel arguments on the CPU -------===//
#include "kiln/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCPUGRIDARGS
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct KilnCpuGridArgsPass : kiln::impl::KilnCpuGridArgsBase<KilnCpuGridArgsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(kiln::KilnDialect::getKernelAttrName()) || func.isExternal())
        continue;
      Type i32 = IntegerType::get(&getContext(), 32);
      unsigned first = func.getNumArguments();
      SmallVector<unsigned> positions(6, first);
      SmallVector<Type> types(6, i32);
      SmallVector<DictionaryAttr> attrs(6, DictionaryAttr::get(&getContext()));
      SmallVector<Location> locs(6, func.getLoc());
      if (failed(func.insertArguments(positions, types, attrs, locs)))
        return signalPassFailure();
      func.walk([&](Operation *op) {
        if (auto pid = dyn_cast<kiln::ProgramIdOp>(op)) {
          pid.replaceAllUsesWith(func.getArgument(first + pid.getAxis()));
          pid.erase();
        } else if (auto np = dyn_cast<kiln::NumProgramsOp>(op)) {
          np.replaceAllUsesWith(func.getArgument(first + 3 + np.getAxis()));
          np.erase();
        }
      });
    }
  }
};
} // namespace
