//===- ShapeToCpu.cpp - kiln tile construction and shape ops on the CPU ---===//
#include "CpuPatterns.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace {

/// Row-major reshape between static shapes through a 1-D collapse.
Value reshapeTensor(OpBuilder &b, Location loc, Value src, RankedTensorType dst) {
  auto srcType = cast<RankedTensorType>(src.getType());
  if (srcType == dst)
    return src;
  Value flat = src;
  if (srcType.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t i = 0; i < srcType.getRank(); ++i)
      all.push_back(i);
    flat = tensor::CollapseShapeOp::create(b, loc, src, ArrayRef<ReassociationIndices>{all});
  }
  if (dst.getRank() == 1)
    return flat;
  ReassociationIndices all;
  for (int64_t i = 0; i < dst.getRank(); ++i)
    all.push_back(i);
  return tensor::ExpandShapeOp::create(b, loc, dst, flat, ArrayRef<ReassociationIndices>{all});
}

struct MakeRangeLowering : OpConversionPattern<kiln::MakeRangeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::MakeRangeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int32_t start = op.getStart();
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{}, ValueRange{init},
        SmallVector<AffineMap>{rewriter.getMultiDimIdentityMap(1)},
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange) {
          Value i = linalg::IndexOp::create(b, l, 0);
          Value i32 = arith::IndexCastOp::create(b, l, b.getI32Type(), i);
          Value off = arith::ConstantOp::create(b, l, b.getI32IntegerAttr(start));
          linalg::YieldOp::create(b, l, ValueRange{arith::AddIOp::create(b, l, i32, off)});
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct SplatLowering : OpConversionPattern<kiln::SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value init =
        tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(), type.getElementType());
    rewriter.replaceOpWithNewOp<linalg::FillOp>(op, adaptor.getSrc(), init);
    return success();
  }
};

struct BroadcastLowering : OpConversionPattern<kiln::BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::BroadcastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dst = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    auto src = cast<RankedTensorType>(adaptor.getSrc().getType());
    // Broadcast dimensions read index 0 of the source.
    SmallVector<AffineExpr> exprs;
    for (int64_t i = 0; i < dst.getRank(); ++i)
      exprs.push_back(src.getDimSize(i) == dst.getDimSize(i) ? rewriter.getAffineDimExpr(i)
                                                             : rewriter.getAffineConstantExpr(0));
    auto inMap = AffineMap::get(dst.getRank(), 0, exprs, rewriter.getContext());
    Value init = tensor::EmptyOp::create(rewriter, loc, dst.getShape(), dst.getElementType());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{dst}, ValueRange{adaptor.getSrc()}, ValueRange{init},
        SmallVector<AffineMap>{inMap, rewriter.getMultiDimIdentityMap(dst.getRank())},
        SmallVector<utils::IteratorType>(dst.getRank(), utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) { linalg::YieldOp::create(b, l, args[0]); });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

template <class Op> struct ReshapeLikeLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto dst = cast<RankedTensorType>(this->getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOp(op, reshapeTensor(rewriter, op.getLoc(), adaptor.getSrc(), dst));
    return success();
  }
};

struct TransLowering : OpConversionPattern<kiln::TransOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(kiln::TransOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto dst = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), dst.getShape(), dst.getElementType());
    auto transpose = linalg::TransposeOp::create(rewriter, op.getLoc(), adaptor.getSrc(), init,
                                                 ArrayRef<int64_t>{1, 0});
    rewriter.replaceOp(op, transpose->getResult(0));
    return success();
  }
};

} // namespace

void kiln::populateShapeToCpuPatterns(CpuTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<MakeRangeLowering, SplatLowering, BroadcastLowering, TransLowering,
               ReshapeLikeLowering<kiln::ExpandDimsOp>, ReshapeLikeLowering<kiln::ReshapeOp>>(
      converter, patterns.getContext());
}
