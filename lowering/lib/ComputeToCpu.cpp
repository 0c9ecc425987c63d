//===- ComputeToCpu.cpp - kiln dot, reductions, casts, select on the CPU --===//
#include "CpuPatterns.h"
#include "ElementOps.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;

namespace {

Value emptyLike(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elem) {
  return tensor::EmptyOp::create(b, loc, shape, elem);
}

Value filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, TypedAttr value) {
  Value init = emptyLike(b, loc, shape, value.getType());
  Value v = arith::ConstantOp::create(b, loc, value);
  return linalg::FillOp::create(b, loc, v, init).getResult(0);
}

/// The identity of a reduction: 0 for sum, the lowest value for max, the highest for min.
TypedAttr identity(OpBuilder &b, kiln::ReduceKind kind, Type elem) {
  if (auto ft = dyn_cast<FloatType>(elem)) {
    double inf = std::numeric_limits<double>::infinity();
    double v = kind == kiln::ReduceKind::Sum ? 0.0 : kind == kiln::ReduceKind::Max ? -inf : inf;
    return b.getFloatAttr(ft, v);
  }
  unsigned w = elem.getIntOrFloatBitWidth();
  APInt v = kind == kiln::ReduceKind::Sum   ? APInt::getZero(w)
            : kind == kiln::ReduceKind::Max ? APInt::getSignedMinValue(w)
                                            : APInt::getSignedMaxValue(w);
  return b.getIntegerAttr(elem, v);
}

/// Rank-0 tensors become scalars.
Value scalarize(OpBuilder &b, Location loc, Value v) {
  if (cast<RankedTensorType>(v.getType()).getRank() == 0)
    return tensor::ExtractOp::create(b, loc, v, ValueRange{});
  return v;
}

struct DotLowering : OpConversionPattern<kiln::DotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::DotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    // linalg.matmul extends f16/bf16 operands to the f32 accumulator type.
    rewriter.replaceOpWithNewOp<linalg::MatmulOp>(
        op, TypeRange{op.getType()}, ValueRange{adaptor.getA(), adaptor.getB()},
        ValueRange{adaptor.getAcc()});
    return success();
  }
};

struct ReduceLowering : OpConversionPattern<kiln::ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto src = op.getSrc().getType();
    Type elem = src.getElementType();
    SmallVector<int64_t> shape(src.getShape());
    shape.erase(shape.begin() + op.getAxis());
    kiln::ReduceKind kind = op.getKind();
    Value init = filled(rewriter, loc, shape, identity(rewriter, kind, elem));
    auto reduce = linalg::ReduceOp::create(
        rewriter, loc, ValueRange{adaptor.getSrc()}, ValueRange{init},
        SmallVector<int64_t>{int64_t(op.getAxis())},
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, kiln::emitCombine(b, l, kind, args[0], args[1]));
        });
    rewriter.replaceOp(op, scalarize(rewriter, loc, reduce.getResult(0)));
    return success();
  }
};

struct ArgMaxLowering : OpConversionPattern<kiln::ArgMaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::ArgMaxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto src = op.getSrc().getType();
    Type elem = src.getElementType();
    int64_t axis = op.getAxis(), rank = src.getRank();
    SmallVector<int64_t> shape(src.getShape());
    shape.erase(shape.begin() + axis);
    Value bestInit = filled(rewriter, loc, shape, identity(rewriter, kiln::ReduceKind::Max, elem));
    Value idxInit = filled(rewriter, loc, shape, rewriter.getI32IntegerAttr(0));
    SmallVector<AffineExpr> outExprs;
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        outExprs.push_back(rewriter.getAffineDimExpr(i));
    auto outMap = AffineMap::get(rank, 0, outExprs, rewriter.getContext());
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    iters[axis] = utils::IteratorType::reduction;
    bool fp = isa<FloatType>(elem);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{bestInit.getType(), idxInit.getType()},
        ValueRange{adaptor.getSrc()}, ValueRange{bestInit, idxInit},
        SmallVector<AffineMap>{rewriter.getMultiDimIdentityMap(rank), outMap, outMap}, iters,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = args[0], best = args[1], bestIdx = args[2];
          Value i = linalg::IndexOp::create(b, l, axis);
          Value i32 = arith::IndexCastOp::create(b, l, b.getI32Type(), i);
          // Strictly greater keeps the first maximum (iteration runs in index order).
          Value gt = fp ? Value(arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x, best))
                        : Value(arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, x, best));
          Value first = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::eq, i,
              arith::ConstantIndexOp::create(b, l, 0));
          Value take = arith::OrIOp::create(b, l, gt, first);
          linalg::YieldOp::create(b, l,
                                  ValueRange{arith::SelectOp::create(b, l, take, x, best),
                                             arith::SelectOp::create(b, l, take, i32, bestIdx)});
        });
    rewriter.replaceOp(op, scalarize(rewriter, loc, generic.getResult(1)));
    return success();
  }
};

struct CastLowering : OpConversionPattern<kiln::CastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::CastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, kiln::emitCast(rewriter, op.getLoc(), adaptor.getSrc(), op.getType()));
    return success();
  }
};

struct SelectLowering : OpConversionPattern<kiln::SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::SelectOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, adaptor.getCondition(),
                                                 adaptor.getTrueValue(), adaptor.getFalseValue());
    return success();
  }
};

} // namespace

void kiln::populateComputeToCpuPatterns(CpuTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<DotLowering, ReduceLowering, ArgMaxLowering, CastLowering, SelectLowering>(
      converter, patterns.getContext());
}
