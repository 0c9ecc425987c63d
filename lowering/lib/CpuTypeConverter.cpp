//===- CpuTypeConverter.cpp - pointers become i64 addresses on the CPU ----===//
#include "CpuPatterns.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

kiln::CpuTypeConverter::CpuTypeConverter(MLIRContext *ctx) {
  addConversion([](Type t) { return t; });
  addConversion([ctx](kiln::PtrType) -> Type { return IntegerType::get(ctx, 64); });
  addConversion([ctx](RankedTensorType t) -> Type {
    if (isa<kiln::PtrType>(t.getElementType()))
      return RankedTensorType::get(t.getShape(), IntegerType::get(ctx, 64));
    return t;
  });
  auto materialize = [](OpBuilder &b, Type type, ValueRange inputs, Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs).getResult(0);
  };
  addSourceMaterialization(materialize);
  addTargetMaterialization(materialize);
}
