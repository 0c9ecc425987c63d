//===- Coalesce.cpp - the distributed layout of every tile ----------------===//
//
// Gives every tile of a kiln kernel the layout its global accesses coalesce
// in (see defaultLayout): consecutive threads hold consecutive groups of a
// row, so that a warp's loads and stores cover whole cache lines. The group
// is 16 bytes of the narrowest element the kernel accesses contiguously at
// that shape (the contiguity analysis, AxisInfo, says which accesses are),
// so that each thread's group is one 16-byte access and a warp's access is
// one run of 512 bytes; shapes without contiguous accesses get groups of up
// to 8. Later passes replace the layout where tensor cores want another.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "LayoutUtils.h"

#include "../Analysis/AxisInfo.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCOALESCE
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// For each tile shape of `f` accessed contiguously in global memory (a
/// load, store or async copy whose addresses have stride 1 along the last
/// dimension), the elements of the narrowest such access that fill 16 bytes.
llvm::DenseMap<ArrayRef<int64_t>, int64_t> contiguousGroups(func::FuncOp f) {
  kiln::AxisInfo axis(f);
  llvm::DenseMap<ArrayRef<int64_t>, int64_t> groups;
  f.walk([&](Operation *op) {
    Value ptr;
    if (auto ld = dyn_cast<kiln::LoadOp>(op))
      ptr = ld.getPtr();
    else if (auto st = dyn_cast<kiln::StoreOp>(op))
      ptr = st.getPtr();
    else if (auto cp = dyn_cast<kiln::AsyncCopyOp>(op))
      ptr = cp.getPtr();
    auto tile = ptr ? dyn_cast<RankedTensorType>(ptr.getType()) : RankedTensorType();
    if (!tile || axis.stride(ptr) != 1)
      return;
    Type pointee = cast<kiln::PtrType>(tile.getElementType()).getPointeeType();
    int64_t bytes = isa<kiln::PtrType>(pointee) ? 8 : std::max<int64_t>(1, pointee.getIntOrFloatBitWidth() / 8);
    int64_t &group = groups[tile.getShape()];
    group = std::max(group, std::max<int64_t>(1, 16 / bytes));
  });
  return groups;
}

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
    for (auto f : module.getOps<func::FuncOp>()) {
      if (!f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        continue;
      llvm::DenseMap<ArrayRef<int64_t>, int64_t> groups = contiguousGroups(f);
      auto assign = [&](Value v) {
        auto tile = dyn_cast<RankedTensorType>(v.getType());
        if (!tile || tile.getEncoding())
          return;
        auto group = groups.find(tile.getShape());
        int64_t maxVec = group == groups.end() ? 8 : group->second;
        v.setType(kiln::withLayout(tile, kiln::layouts::defaultLayout(tile, numWarps, maxVec)));
      };
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
