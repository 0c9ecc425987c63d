//===- TmaStores.cpp - epilogue stores by the Tensor Memory Accelerator ----===//
//
// A GEMM's epilogue stores its accumulator tile through a conversion to a
// blocked layout: every thread writes its elements to shared memory, the
// program synchronises, every thread reads back 16-byte rows and stores
// them with their masks. Here such a store becomes one kiln.tma_store of the
// accumulator itself (see the pass's description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "Tma.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNTMASTORES
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

bool isAccumulator(Type t) { return isa_and_nonnull<kiln::MmaLayoutAttr>(kiln::getLayout(t)); }

/// The stores at the end of `f`'s body with nothing after them that reads
/// or writes memory but each other, last first.
SmallVector<kiln::StoreOp> epilogueStores(func::FuncOp f) {
  SmallVector<kiln::StoreOp> stores;
  for (Operation &op : llvm::reverse(f.getBody().front().without_terminator())) {
    if (auto st = dyn_cast<kiln::StoreOp>(op))
      stores.push_back(st);
    else if (!isMemoryEffectFree(&op))
      break;
  }
  return stores;
}

/// Rewrites `st` into a kiln.tma_store of the accumulator it converts, when
/// it stores one of at least `minElements` elements into a block TMA can
/// write. Returns whether it did.
bool rewrite(func::FuncOp f, kiln::StoreOp st, int64_t minElements) {
  Value v = st.getValue();
  Value acc = isAccumulator(v.getType()) ? v : Value();
  auto cvt = v.getDefiningOp<kiln::ConvertLayoutOp>();
  if (!acc && cvt && isAccumulator(cvt.getSrc().getType()))
    acc = cvt.getSrc();
  auto tile = dyn_cast<RankedTensorType>(v.getType());
  if (!acc || !tile || tile.getNumElements() < minElements)
    return false;
  std::optional<kiln::tma::Block> block = kiln::tma::matchTmaBlock(st.getPtr(), st.getMask(), Value(), tile);
  if (!block)
    return false;
  Value map = kiln::tma::addTensorMap(f, *block, tile, st.getLoc());
  if (!map)
    return false;
  OpBuilder b(st);
  Location loc = st.getLoc();
  kiln::TmaStoreOp::create(b, loc, acc, map, kiln::tma::materialize(b, loc, block->row),
                           kiln::tma::materialize(b, loc, block->col));
  st.erase();
  if (cvt && cvt->use_empty())
    cvt.erase();
  return true;
}

struct TmaStoresPass : kiln::impl::KilnTmaStoresBase<TmaStoresPass> {
  using KilnTmaStoresBase::KilnTmaStoresBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        continue;
      // Last first, and only while every store after it went the same way:
      // a plain store is never reordered before an asynchronous one.
      for (kiln::StoreOp st : epilogueStores(f))
        if (!rewrite(f, st, minElements))
          break;
    }
  }
};

} // namespace
