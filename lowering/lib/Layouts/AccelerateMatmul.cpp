//===- AccelerateMatmul.cpp - kiln.dot on tensor cores --------------------===//
//
// Chooses the #kiln.mma accumulator layout of every product that tensor
// cores can compute, and where its operands are read from (#kiln.shared:
// in place from a pipelining ring, or converted there).
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "LayoutUtils.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNACCELERATEMATMUL
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::layouts;

namespace {

/// Element-wise users of `v` with its shape (conversions included).
bool sameShapeElementwise(Operation *op, Value v) {
  if (!isElementwise(op) && !isa<kiln::ConvertLayoutOp>(op))
    return false;
  auto r = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return r && r.getShape() == cast<RankedTensorType>(v.getType()).getShape();
}

/// Whether element-wise uses of `v` reach a reduction along its rows.
bool rowsReduced(Value v, int depth) {
  if (depth > 8)
    return false;
  for (Operation *user : v.getUsers()) {
    if (auto red = dyn_cast<kiln::ReduceOp>(user); red && red.getAxis() == 1)
      return true;
    if (sameShapeElementwise(user, v) && rowsReduced(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}

/// Whether `v` is computed element-wise from a kiln.dot's result.
bool fromProduct(Value v, int depth) {
  Operation *op = v.getDefiningOp();
  if (!op || depth > 8)
    return false;
  if (isa<kiln::DotOp>(op))
    return true;
  if (!sameShapeElementwise(op, v))
    return false;
  return llvm::any_of(op->getOperands(), [&](Value x) {
    auto t = dyn_cast<RankedTensorType>(x.getType());
    return t && t.getShape() == cast<RankedTensorType>(v.getType()).getShape() && fromProduct(x, depth + 1);
  });
}

/// The accumulator layout of `dot` on tensor cores, if it can use them.
kiln::MmaLayoutAttr chooseMma(kiln::DotOp dot, int64_t warps, StringRef arch) {
  auto a = dot.getA().getType();
  Type in = a.getElementType();
  int64_t M = a.getDimSize(0), K = a.getDimSize(1), N = dot.getB().getType().getDimSize(1);
  MLIRContext *ctx = dot.getContext();
  // f32 products that allow TF32: wgmma on sm_90a, which reads both
  // operands K-major from 128-byte swizzled panels of 32 columns (A as it
  // is, B transposed: from a transposed ring, or staged so), 64 rows per
  // warpgroup. Anything else keeps the f32 FMA loop.
  if (in.isF32())
    return dot.getTf32() && arch == "sm_90a" && warps % 4 == 0 && M == 16 * warps && N % 8 == 0 && N <= 256 &&
                   K % 32 == 0
               ? kiln::MmaLayoutAttr::get(ctx, 3, warps, 1)
               : kiln::MmaLayoutAttr();
  if (!in.isF16() && !in.isBF16())
    return {};
  if (K % 16 != 0)
    return {};
  // Rows reduced (scores) or multiplied from another product (probabilities
  // times V): every warp on rows, so that each holds whole rows.
  if (M % (16 * warps) == 0 && N % 8 == 0 && (rowsReduced(dot.getResult(), 0) || fromProduct(dot.getA(), 0)))
    return kiln::MmaLayoutAttr::get(ctx, 2, warps, 1);
  // Otherwise the most square warp regions: fewer fragment loads per mma.
  kiln::MmaLayoutAttr best;
  int64_t bestCost = 0;
  for (int64_t wm = 1; wm <= warps; wm *= 2) {
    int64_t wn = warps / wm;
    if (M % (16 * wm) != 0 || N % (8 * wn) != 0)
      continue;
    int64_t cost = std::abs(M / wm - N / wn);
    if (!best || cost < bestCost) {
      best = kiln::MmaLayoutAttr::get(ctx, 2, wm, wn);
      bestCost = cost;
    }
  }
  return best;
}

/// Whether wgmma reads `v`, an operand of a product, in place: a ring
/// buffer kept in shared memory (kiln.local_load) or, for B, a transposed
/// view of one, whose rows the 128-byte swizzle covers in whole 64-column
/// panels along the contiguous dimension (K for A and a transposed B, N for
/// B as is).
bool wgmmaReadsInPlace(Value v, bool isB) {
  auto layout = dyn_cast_or_null<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType()));
  if (!layout || !layout.getSwizzle())
    return false;
  Value ring = v;
  if (auto t = v.getDefiningOp<kiln::TransOp>()) {
    if (!isB || !layout.getTransposed())
      return false;
    ring = t.getSrc();
  } else if (layout.getTransposed()) {
    return false;
  }
  auto ll = ring.getDefiningOp<kiln::LocalLoadOp>();
  if (!ll || !isa_and_nonnull<kiln::SharedLayoutAttr>(kiln::getLayout(ll.getType())))
    return false;
  auto tile = ll.getType();
  return tile.getRank() == 2 && tile.getElementType().getIntOrFloatBitWidth() == 16 &&
         tile.getDimSize(1) % 64 == 0;
}

/// Whether wgmma can read A operand `v` converted to shared memory (staged
/// there by the product, in 64-column swizzled panels along K), or from
/// registers if kiln-remove-layout-conversions takes it from an accumulator.
bool wgmmaStagesA(Value v) {
  auto cvt = v.getDefiningOp<kiln::ConvertLayoutOp>();
  auto layout = dyn_cast_or_null<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType()));
  auto tile = cast<RankedTensorType>(v.getType());
  return cvt && layout && layout.getSwizzle() && !layout.getTransposed() &&
         tile.getElementType().getIntOrFloatBitWidth() == 16 && tile.getDimSize(1) % 64 == 0;
}

struct KilnAccelerateMatmulPass : kiln::impl::KilnAccelerateMatmulBase<KilnAccelerateMatmulPass> {
  using KilnAccelerateMatmulBase::KilnAccelerateMatmulBase;
  llvm::MapVector<Operation *, kiln::MmaLayoutAttr> chosen;
  int64_t warps = 0;

  /// Whether `use` reads its value as an A or B operand of a tensor-core
  /// product. With `asStored`, one that can read it as stored (row-major):
  /// not the B of a TF32 product, which wgmma reads K-major only.
  bool tensorCoreOperand(OpOperand &use, bool asStored = false) {
    auto dot = dyn_cast<kiln::DotOp>(use.getOwner());
    return dot && chosen.count(dot) && use.getOperandNumber() < 2 &&
           !(asStored && use.getOperandNumber() == 1 && tf32(dot));
  }
  static bool tf32(kiln::DotOp dot) { return dot.getA().getType().getElementType().isF32(); }
  /// A kiln.trans whose every use is a tensor-core B operand.
  bool onlyTensorCoreB(Value v) {
    return !v.use_empty() && llvm::all_of(v.getUses(), [&](OpOperand &use) {
      return tensorCoreOperand(use) && use.getOperandNumber() == 1;
    });
  }
  kiln::SharedLayoutAttr shared(RankedTensorType stored, bool transposed) {
    return kiln::SharedLayoutAttr::get(stored.getContext(), keepsSwizzled(stored), transposed, warps);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    warps = numWarpsOf(module);
    if (warps == 0) {
      module.emitError("kiln-accelerate-matmul: run kiln-coalesce first (no kiln.num_warps)");
      return signalPassFailure();
    }
    // Choose on the IR as it is, then rewrite.
    module.walk([&](kiln::DotOp dot) {
      if (auto mma = chooseMma(dot, warps, arch))
        chosen[dot] = mma;
    });
    OpBuilder b(&getContext());
    // Ring buffers read only by tensor cores stay in shared memory, as do
    // transposes of them.
    module.walk([&](kiln::LocalLoadOp ll) {
      Value v = ll.getResult();
      bool inPlace = !v.use_empty() && llvm::all_of(v.getUses(), [&](OpOperand &use) {
        if (auto t = dyn_cast<kiln::TransOp>(use.getOwner()))
          return onlyTensorCoreB(t);
        return tensorCoreOperand(use, /*asStored=*/true);
      });
      if (!inPlace)
        return;
      SmallVector<Operation *> users(v.getUsers());
      v.setType(kiln::withLayout(v.getType(), shared(ll.getType(), false)));
      for (Operation *user : users)
        if (auto t = dyn_cast<kiln::TransOp>(user))
          t.getResult().setType(cast<RankedTensorType>(kiln::withLayout(t.getType(), shared(ll.getType(), true))));
    });
    // Other B operands that are transposes: their source, converted to
    // shared memory, read transposed.
    module.walk([&](kiln::TransOp t) {
      if (isa<kiln::SharedLayoutAttr>(kiln::getLayout(t.getType())) || !onlyTensorCoreB(t))
        return;
      b.setInsertionPoint(t);
      auto src = t.getSrc().getType();
      Value staged = inLayout(b, t.getSrc(), shared(src, false));
      t.getSrcMutable().assign(staged);
      t.getResult().setType(cast<RankedTensorType>(kiln::withLayout(t.getType(), shared(src, true))));
    });
    for (auto [op, mma] : chosen) {
      auto dot = cast<kiln::DotOp>(op);
      b.setInsertionPoint(dot);
      for (int i = 0; i < 2; ++i) {
        Value v = dot->getOperand(i);
        if (isa<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType())))
          continue;
        auto tile = cast<RankedTensorType>(v.getType());
        // A TF32 product's B (K x N) is staged as its transpose (N x K, K
        // contiguous), read transposed.
        bool transposed = i == 1 && tf32(dot);
        auto stored = transposed ? RankedTensorType::get({tile.getDimSize(1), tile.getDimSize(0)},
                                                         tile.getElementType(), tile.getEncoding())
                                 : tile;
        dot->setOperand(i, inLayout(b, v, shared(stored, transposed)));
      }
      if (mma.getVersion() == 3 && tf32(dot)) { // chosen for wgmma already
        dot.getAccMutable().assign(inLayout(b, dot.getAcc(), mma));
        retypeKeepingUsers(b, dot.getResult(), kiln::withLayout(dot.getType(), mma));
        continue;
      }
      // Hopper: B read in place, A in place or staged, 64 rows per
      // warpgroup: on wgmma.
      int64_t M = dot.getA().getType().getDimSize(0), N = dot.getB().getType().getDimSize(1);
      if (arch == "sm_90a" && warps % 4 == 0 && M == 16 * warps && N % 8 == 0 && N <= 256 &&
          (wgmmaReadsInPlace(dot.getA(), false) || wgmmaStagesA(dot.getA())) &&
          wgmmaReadsInPlace(dot.getB(), true))
        mma = kiln::MmaLayoutAttr::get(&getContext(), 3, warps, 1);
      dot.getAccMutable().assign(inLayout(b, dot.getAcc(), mma));
      retypeKeepingUsers(b, dot.getResult(), kiln::withLayout(dot.getType(), mma));
    }
  }
};

} // namespace
