//===- KilnDialect.cpp - kiln dialect registration and types --------------===//
#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/KilnDialect.cpp.inc"
#include "kiln/Dialect/KilnEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/KilnTypes.cpp.inc"

#include "kiln/Dialect/KilnAttrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnAttrs.cpp.inc"

namespace {
/// Short names for layouts in printed IR (`#mma`, `#blocked1`, ...), as the
/// types that carry them are long.
struct KilnOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    StringRef name = llvm::TypeSwitch<Attribute, StringRef>(attr)
                         .Case<BlockedLayoutAttr>([](auto) { return "blocked"; })
                         .Case<ReplicatedLayoutAttr>([](auto) { return "replicated"; })
                         .Case<MmaLayoutAttr>([](auto) { return "mma"; })
                         .Case<SliceLayoutAttr>([](auto) { return "slice"; })
                         .Case<DotOperandLayoutAttr>([](auto) { return "dot_op"; })
                         .Case<SharedLayoutAttr>([](auto) { return "shared"; })
                         .Default([](Attribute) { return ""; });
    if (name.empty())
      return AliasResult::NoAlias;
    os << name;
    return AliasResult::FinalAlias;
  }
};
} // namespace

void KilnDialect::initialize() {
  addInterfaces<KilnOpAsmInterface>();
  addTypes<
#define GET_TYPEDEF_LIST
#include "kiln/Dialect/KilnTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/Dialect/KilnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

LogicalResult PtrType::verify(function_ref<InFlightDiagnostic()> emitError, Type pointee) {
  if (!isa<FloatType, IntegerType>(pointee))
    return emitError() << "!kiln.ptr must point to a float or integer type, got " << pointee;
  return success();
}

// !kiln.shared<STAGES x D0 x ... x ELEM>
Type SharedType::parse(AsmParser &parser) {
  SmallVector<int64_t> dims;
  Type elem;
  if (parser.parseLess() || parser.parseDimensionList(dims, /*allowDynamic=*/false) ||
      parser.parseType(elem) || parser.parseGreater())
    return {};
  if (dims.size() < 2) {
    parser.emitError(parser.getNameLoc(), "!kiln.shared needs a stage count and a tile shape");
    return {};
  }
  return SharedType::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                parser.getContext(), dims.front(), ArrayRef(dims).drop_front(), elem);
}

void SharedType::print(AsmPrinter &printer) const {
  printer << '<' << getStages();
  for (int64_t d : getShape())
    printer << 'x' << d;
  printer << 'x' << getElementType() << '>';
}

LogicalResult SharedType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t stages,
                                 ArrayRef<int64_t> shape, Type elem) {
  if (stages < 1)
    return emitError() << "!kiln.shared needs at least one stage, got " << stages;
  if (llvm::any_of(shape, [](int64_t d) { return d < 1; }))
    return emitError() << "!kiln.shared needs a static, non-empty tile shape";
  if (!isa<FloatType, IntegerType>(elem))
    return emitError() << "!kiln.shared holds floats or integers, got " << elem;
  return success();
}

Type kiln::getElementTypeOrSelf(Type t) {
  if (auto tile = dyn_cast<RankedTensorType>(t))
    return tile.getElementType();
  return t;
}

Type kiln::getSameShape(Type like, Type elem) {
  if (auto tile = dyn_cast<RankedTensorType>(like))
    return RankedTensorType::get(tile.getShape(), elem, tile.getEncoding());
  return elem;
}

LayoutAttr kiln::getLayout(Type t) {
  auto tile = dyn_cast<RankedTensorType>(t);
  return tile ? dyn_cast_or_null<LayoutAttr>(tile.getEncoding()) : LayoutAttr();
}

Type kiln::withLayout(Type t, Attribute layout) {
  if (auto tile = dyn_cast<RankedTensorType>(t))
    return RankedTensorType::get(tile.getShape(), tile.getElementType(), layout);
  return t;
}

Type kiln::getPointeeType(Type ptrLike) {
  auto ptr = dyn_cast<PtrType>(getElementTypeOrSelf(ptrLike));
  if (!ptr)
    return {};
  return getSameShape(ptrLike, ptr.getPointeeType());
}

Type kiln::getMaskType(Type valueLike) {
  return getSameShape(valueLike, IntegerType::get(valueLike.getContext(), 1));
}
