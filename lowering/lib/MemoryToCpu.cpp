//===- MemoryToCpu.cpp - kiln pointers, loads and stores on the CPU -------===//
//
// Addresses are i64; a tile of pointers is a tensor of i64. Masked accesses
// become one `scf.if` per element around an `llvm.load` / `llvm.store`, so a
// masked-off element never touches memory.
//
//===----------------------------------------------------------------------===//
#include "CpuPatterns.h"
#include "ElementOps.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace {

int64_t byteSize(Type elem) { return std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8); }

/// Host memory is address space 0.
Value loadElement(OpBuilder &b, Location loc, Type elem, Value addr, Value mask, Value fill) {
  return kiln::emitMaskedLoad(b, loc, elem, addr, mask, fill, /*addrSpace=*/0);
}
void storeElement(OpBuilder &b, Location loc, Value addr, Value value, Value mask) {
  kiln::emitMaskedStore(b, loc, addr, value, mask, /*addrSpace=*/0);
}

struct AddPtrLowering : OpConversionPattern<kiln::AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type pointee = cast<kiln::PtrType>(kiln::getElementTypeOrSelf(op.getType())).getPointeeType();
    Type addrType = getTypeConverter()->convertType(op.getType());
    Value offset = adaptor.getOffset();
    Type offElem = kiln::getElementTypeOrSelf(offset.getType());
    if (offElem.getIntOrFloatBitWidth() < 64)
      offset = arith::ExtSIOp::create(rewriter, loc, addrType, offset);
    TypedAttr size = rewriter.getI64IntegerAttr(byteSize(pointee));
    if (auto tile = dyn_cast<RankedTensorType>(addrType))
      size = SplatElementsAttr::get(tile, size);
    Value scale = arith::ConstantOp::create(rewriter, loc, size);
    Value bytes = arith::MulIOp::create(rewriter, loc, offset, scale);
    rewriter.replaceOpWithNewOp<arith::AddIOp>(op, adaptor.getPtr(), bytes);
    return success();
  }
};

struct LoadLowering : OpConversionPattern<kiln::LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type elem = kiln::getElementTypeOrSelf(op.getType());
    auto tile = dyn_cast<RankedTensorType>(op.getType());
    if (!tile) {
      rewriter.replaceOp(op, loadElement(rewriter, loc, elem, adaptor.getPtr(), adaptor.getMask(),
                                         adaptor.getOther()));
      return success();
    }
    // linalg.generic over (addr, mask?, other?) -> result, all identity maps.
    SmallVector<Value> ins{adaptor.getPtr()};
    if (adaptor.getMask())
      ins.push_back(adaptor.getMask());
    if (adaptor.getOther())
      ins.push_back(adaptor.getOther());
    Value init = tensor::EmptyOp::create(rewriter, loc, tile.getShape(), elem);
    auto map = rewriter.getMultiDimIdentityMap(tile.getRank());
    SmallVector<AffineMap> maps(ins.size() + 1, map);
    SmallVector<utils::IteratorType> iters(tile.getRank(), utils::IteratorType::parallel);
    bool hasMask = bool(adaptor.getMask()), hasOther = bool(adaptor.getOther());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{tile}, ins, ValueRange{init}, maps, iters,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value mask = hasMask ? args[1] : Value();
          Value fill = hasOther ? args[2] : Value();
          linalg::YieldOp::create(b, l, loadElement(b, l, elem, args[0], mask, fill));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// A loop nest over `tile`'s elements at the insertion point, calling
/// body(address, value, mask) with element i of `ptrs`, `values` and `mask`
/// (null without one) in its innermost loop.
template <class F>
void forEachElement(ConversionPatternRewriter &rewriter, Location loc, RankedTensorType tile, Value ptrs,
                    Value values, Value mask, F body) {
  OpBuilder::InsertionGuard guard(rewriter);
  SmallVector<Value> ivs;
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  for (int64_t d : tile.getShape()) {
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, d);
    auto loop = scf::ForOp::create(rewriter, loc, zero, ub, one);
    ivs.push_back(loop.getInductionVar());
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  }
  Value addr = tensor::ExtractOp::create(rewriter, loc, ptrs, ivs);
  Value value = tensor::ExtractOp::create(rewriter, loc, values, ivs);
  Value bit = mask ? Value(tensor::ExtractOp::create(rewriter, loc, mask, ivs)) : Value();
  body(addr, value, bit);
}

struct StoreLowering : OpConversionPattern<kiln::StoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::StoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tile = dyn_cast<RankedTensorType>(op.getValue().getType());
    if (!tile) {
      storeElement(rewriter, loc, adaptor.getPtr(), adaptor.getValue(), adaptor.getMask());
      rewriter.eraseOp(op);
      return success();
    }
    // A loop nest over the tile; stores have no tensor result to build.
    forEachElement(rewriter, loc, tile, adaptor.getPtr(), adaptor.getValue(), adaptor.getMask(),
                   [&](Value addr, Value value, Value mask) { storeElement(rewriter, loc, addr, value, mask); });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Declares the runtime function `name` of type `type` (once per module).
void declareRuntime(Operation *op, ConversionPatternRewriter &rewriter, StringRef name, FunctionType type) {
  auto module = op->getParentOfType<ModuleOp>();
  if (module.lookupSymbol<func::FuncOp>(name))
    return;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  func::FuncOp::create(rewriter, op->getLoc(), name, type).setPrivate();
}

/// Replaces `op` with a call to the runtime function `name` of type `type`.
void replaceWithRuntimeCall(Operation *op, ConversionPatternRewriter &rewriter, StringRef name,
                            FunctionType type, ValueRange args) {
  declareRuntime(op, rewriter, name, type);
  rewriter.replaceOpWithNewOp<func::CallOp>(op, name, type.getResults(), args);
}

/// Programs run on several host threads: a call to the runtime's
/// sequentially consistent `kiln_atomic_add_i32(address, value)` (an
/// llvm.atomicrmw here would stop buffer deallocation, which needs to know
/// every op's memory effects).
struct AtomicAddLowering : OpConversionPattern<kiln::AtomicAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::AtomicAddOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type i32 = rewriter.getI32Type();
    replaceWithRuntimeCall(op, rewriter, "kiln_atomic_add_i32",
                           rewriter.getFunctionType({rewriter.getI64Type(), i32}, {i32}),
                           {adaptor.getPtr(), adaptor.getValue()});
    return success();
  }
};

/// `kiln_atomic_add_f32(address, value)` of the runtime for each element
/// (whose mask holds), in a loop nest over the tile.
struct AtomicAccumulateLowering : OpConversionPattern<kiln::AtomicAccumulateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::AtomicAccumulateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = rewriter.getFunctionType({rewriter.getI64Type(), rewriter.getF32Type()}, {});
    declareRuntime(op, rewriter, "kiln_atomic_add_f32", type);
    auto add = [&](OpBuilder &b, Value addr, Value value, Value mask) {
      OpBuilder::InsertionGuard guard(b);
      if (mask) {
        auto ifOp = scf::IfOp::create(b, loc, mask, /*withElseRegion=*/false);
        b.setInsertionPointToStart(ifOp.thenBlock());
      }
      func::CallOp::create(b, loc, "kiln_atomic_add_f32", TypeRange{}, ValueRange{addr, value});
    };
    auto tile = dyn_cast<RankedTensorType>(op.getValue().getType());
    if (!tile) {
      add(rewriter, adaptor.getPtr(), adaptor.getValue(), adaptor.getMask());
      rewriter.eraseOp(op);
      return success();
    }
    forEachElement(rewriter, loc, tile, adaptor.getPtr(), adaptor.getValue(), adaptor.getMask(),
                   [&](Value addr, Value value, Value mask) { add(rewriter, addr, value, mask); });
    rewriter.eraseOp(op);
    return success();
  }
};

/// The programs of a cluster run on threads of their own (see
/// CpuExecutable): a call to the runtime's `kiln_cluster_reduce_f32(kind,
/// value)`, which meets the cluster's other threads at a barrier.
struct ClusterReduceLowering : OpConversionPattern<kiln::ClusterReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::ClusterReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type f32 = rewriter.getF32Type(), i32 = rewriter.getI32Type();
    Value kind = arith::ConstantOp::create(rewriter, op.getLoc(), rewriter.getI32IntegerAttr(int32_t(op.getKind())));
    replaceWithRuntimeCall(op, rewriter, "kiln_cluster_reduce_f32", rewriter.getFunctionType({i32, f32}, {f32}),
                           {kind, adaptor.getValue()});
    return success();
  }
};

/// An all-gather over the cluster's threads (see CpuExecutable): each
/// program puts its values' elements in its own slots
/// (`kiln_cluster_put_f32(index, value)` after `kiln_cluster_gather_begin(n)`),
/// meets the others (`kiln_cluster_gather_sync()`), reads every program's
/// slots (`kiln_cluster_get_f32(rank, index)`) into its results, and meets
/// them again before any slot is written anew.
struct ClusterGatherLowering : OpConversionPattern<kiln::ClusterGatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::ClusterGatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type(), i32 = rewriter.getI32Type();
    auto begin = rewriter.getFunctionType({i32}, {});
    auto put = rewriter.getFunctionType({i32, f32}, {});
    auto sync = rewriter.getFunctionType({}, {});
    auto get = rewriter.getFunctionType({i32, i32}, {f32});
    declareRuntime(op, rewriter, "kiln_cluster_gather_begin", begin);
    declareRuntime(op, rewriter, "kiln_cluster_put_f32", put);
    declareRuntime(op, rewriter, "kiln_cluster_gather_sync", sync);
    declareRuntime(op, rewriter, "kiln_cluster_get_f32", get);
    auto c32 = [&](OpBuilder &b, int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v))); };
    // Value i's elements are slots offsets[i] .. offsets[i] + numel - 1.
    SmallVector<int64_t> offsets;
    int64_t slots = 0;
    for (Value v : op.getValues()) {
      offsets.push_back(slots);
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      slots += tile ? tile.getNumElements() : 1;
    }
    func::CallOp::create(rewriter, loc, "kiln_cluster_gather_begin", TypeRange{}, ValueRange{c32(rewriter, slots)});
    for (auto [v, offset] : llvm::zip(adaptor.getValues(), offsets)) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (!tile) {
        func::CallOp::create(rewriter, loc, "kiln_cluster_put_f32", TypeRange{}, ValueRange{c32(rewriter, offset), v});
        continue;
      }
      OpBuilder::InsertionGuard guard(rewriter);
      Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      Value ub = arith::ConstantIndexOp::create(rewriter, loc, tile.getDimSize(0));
      auto loop = scf::ForOp::create(rewriter, loc, zero, ub, one);
      rewriter.setInsertionPoint(loop.getBody()->getTerminator());
      Value k = loop.getInductionVar();
      Value x = tensor::ExtractOp::create(rewriter, loc, v, ValueRange{k});
      Value index = arith::AddIOp::create(rewriter, loc, arith::IndexCastOp::create(rewriter, loc, i32, k),
                                          c32(rewriter, offset));
      func::CallOp::create(rewriter, loc, "kiln_cluster_put_f32", TypeRange{}, ValueRange{index, x});
    }
    func::CallOp::create(rewriter, loc, "kiln_cluster_gather_sync", TypeRange{}, ValueRange{});
    SmallVector<Value> results;
    for (auto [r, offset] : llvm::zip(op.getResults(), offsets)) {
      auto tile = cast<RankedTensorType>(r.getType());
      Value init = tensor::EmptyOp::create(rewriter, loc, tile.getShape(), f32);
      auto map = rewriter.getMultiDimIdentityMap(tile.getRank());
      SmallVector<utils::IteratorType> iters(tile.getRank(), utils::IteratorType::parallel);
      auto generic = linalg::GenericOp::create(
          rewriter, loc, TypeRange{RankedTensorType::get(tile.getShape(), f32)}, ValueRange{}, ValueRange{init},
          ArrayRef<AffineMap>{map}, iters, [&, offset = offset](OpBuilder &b, Location l, ValueRange) {
            Value rank = arith::IndexCastOp::create(b, l, i32, linalg::IndexOp::create(b, l, 0));
            Value index = c32(b, offset);
            if (tile.getRank() == 2)
              index = arith::AddIOp::create(
                  b, l, index, arith::IndexCastOp::create(b, l, i32, linalg::IndexOp::create(b, l, 1)));
            auto call = func::CallOp::create(b, l, "kiln_cluster_get_f32", TypeRange{f32}, ValueRange{rank, index});
            linalg::YieldOp::create(b, l, call.getResult(0));
          });
      results.push_back(generic.getResult(0));
    }
    func::CallOp::create(rewriter, loc, "kiln_cluster_gather_sync", TypeRange{}, ValueRange{});
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// Kernels run one after another on the CPU: a launch starts when the
/// previous one has returned, so waiting on it (or letting the next one
/// start) is nothing. An L2 prefetch hint has nothing to act on either.
template <class Op> struct EraseGridDependency : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor, ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::populateMemoryToCpuPatterns(CpuTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<AddPtrLowering, LoadLowering, StoreLowering, AtomicAddLowering, AtomicAccumulateLowering, ClusterReduceLowering, ClusterGatherLowering,
               EraseGridDependency<kiln::GridDependencyWaitOp>, EraseGridDependency<kiln::LaunchDependentsOp>,
               EraseGridDependency<kiln::PrefetchOp>>(
      converter, patterns.getContext());
}
