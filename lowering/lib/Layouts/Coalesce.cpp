//===- Coalesce.cpp - the distributed layout of every tile ----------------===//
//
// Gives every tile of a kiln kernel the layout its global accesses coalesce
// in (see defaultLayout): consecutive threads hold consecutive groups of a
// row, so that a warp's loads and stores cover whole cache lines, 16 bytes
// per thread where the contiguity of the addresses allows (decided per group
// when lowering). Later passes replace it where tensor cores want another.
//
//===----------------------------------------------------------------------===//
#include "LayoutUtils.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCOALESCE
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct KilnCoalescePass : kiln::impl::KilnCoalesceBase<KilnCoalescePass> {
  using KilnCoalesceBase::KilnCoalesceBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (numWarps < 1 || numWarps > 32 || !llvm::isPowerOf2_64(uint64_t(numWarps))) {
      module.emitError("kiln-coalesce: num-warps must be a power of two in [1, 32], got ")
          << static_cast<int>(numWarps);
      return signalPassFailure();
    }
    int64_t recorded = kiln::layouts::numWarpsOf(module);
    if (recorded != 0 && recorded != numWarps) {
      module.emitError("kiln-coalesce: layouts were chosen for ")
          << recorded << " warps, not " << static_cast<int>(numWarps);
      return signalPassFailure();
    }
    module->setAttr(kiln::layouts::kNumWarpsAttr,
                    IntegerAttr::get(IntegerType::get(&getContext(), 32), numWarps));
    auto assign = [&](Value v) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (tile && !tile.getEncoding())
        v.setType(kiln::withLayout(tile, kiln::layouts::defaultLayout(tile, numWarps)));
    };
    for (auto f : module.getOps<func::FuncOp>()) {
      if (!f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        continue;
      f.walk([&](Operation *op) {
        for (Region &region : op->getRegions())
          for (Block &block : region)
            if (op != f.getOperation())
              for (BlockArgument arg : block.getArguments())
                assign(arg);
        for (Value r : op->getResults())
          assign(r);
        // A tile constant's value has the tile's type.
        if (auto c = dyn_cast<arith::ConstantOp>(op))
          if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue()); dense && dense.getType() != c.getType())
            c.setValueAttr(dense.reshape(cast<ShapedType>(c.getType())));
      });
    }
  }
};

} // namespace
