//===- CpuGridArgs.cpp - program ids as kernel arguments on the CPU -------===//
#include "kiln/Lowering/Passes.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

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
      // A kernel that exchanges values in clusters tells the launcher their
      // size through a function of its object, kiln_cluster_size().
      uint32_t clusterSize = kiln::clusterSizeOf(func);
      if (clusterSize && !getOperation().lookupSymbol("kiln_cluster_size")) {
        OpBuilder b(&getContext());
        b.setInsertionPointToEnd(getOperation().getBody());
        auto size = func::FuncOp::create(b, func.getLoc(), "kiln_cluster_size", b.getFunctionType({}, {i32}));
        b.setInsertionPointToStart(size.addEntryBlock());
        Value c = arith::ConstantOp::create(b, func.getLoc(), b.getI32IntegerAttr(int32_t(clusterSize)));
        func::ReturnOp::create(b, func.getLoc(), c);
      }
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
