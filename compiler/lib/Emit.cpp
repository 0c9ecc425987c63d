//===- Emit.cpp - build kiln IR for the typed front end -------------------===//
//
// Implements emit.hpp: every traced tile operation becomes kiln/arith/math/scf
// ops appended to the kernel function under construction.
//
//===----------------------------------------------------------------------===//
#include "kiln/dsl/emit.hpp"

#include "TracedModule.h"

#include "kiln/Dialect/KilnDialect.h"
#include "kiln/core/error.hpp"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

#include <cxxabi.h>
#include <regex>

using namespace mlir;

namespace kiln::detail {
namespace {

struct TraceState {
  TracedModulePtr traced;
  func::FuncOp func;
  OpBuilder builder;
  std::vector<scf::ForOp> loops;
  explicit TraceState(MLIRContext *ctx) : builder(ctx) {}
};

thread_local std::unique_ptr<TraceState> state;

TraceState &st() {
  if (!state)
    throw Error("kiln: a tile operation was used outside of kernel tracing "
                "(tiles exist only inside a kernel's operator())");
  return *state;
}
OpBuilder &b() { return st().builder; }
Location loc() { return st().func.getLoc(); }

Value val(V v) {
  if (!v.impl)
    throw Error("kiln: use of an empty tile value");
  return Value::getFromOpaquePointer(v.impl);
}
V wrap(Value v) { return V{v.getAsOpaquePointer()}; }

Type scalarType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::I1: return IntegerType::get(ctx, 1);
  case DType::I8: return IntegerType::get(ctx, 8);
  case DType::I32: return IntegerType::get(ctx, 32);
  case DType::I64: return IntegerType::get(ctx, 64);
  case DType::F16: return Float16Type::get(ctx);
  case DType::BF16: return BFloat16Type::get(ctx);
  case DType::F32: return Float32Type::get(ctx);
  case DType::F64: return Float64Type::get(ctx);
  case DType::Ptr: break;
  }
  throw Error("kiln: pointer is not a scalar dtype");
}

SmallVector<int64_t> toShape(std::span<const int> shape) {
  return SmallVector<int64_t>(shape.begin(), shape.end());
}

bool isFloatLike(Value v) { return isa<FloatType>(kiln::getElementTypeOrSelf(v.getType())); }

Type withShape(Type elem, ArrayRef<int64_t> shape) {
  if (shape.empty())
    return elem;
  return RankedTensorType::get(shape, elem);
}

ArrayRef<int64_t> shapeOf(Value v) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return t.getShape();
  return {};
}

} // namespace

void begin_kernel(const std::string &name, std::span<const Param> params) {
  if (state)
    throw Error("kiln: kernel '" + name + "' traced while another kernel is being traced");
  TracedModulePtr traced(new TracedModule());
  traced->context = makeKilnContext();
  traced->name = name;
  MLIRContext *ctx = traced->context.get();
  state = std::make_unique<TraceState>(ctx);
  auto &s = *state;
  Location l = NameLoc::get(StringAttr::get(ctx, name));
  traced->module = ModuleOp::create(l);
  SmallVector<Type> types;
  for (const Param &p : params) {
    Type t = scalarType(ctx, p.dtype);
    types.push_back(p.is_pointer ? Type(kiln::PtrType::get(ctx, t)) : t);
    traced->params.push_back(p);
  }
  s.builder.setInsertionPointToEnd(traced->module->getBody());
  s.func = func::FuncOp::create(s.builder, l, name, FunctionType::get(ctx, types, {}));
  s.func->setAttr(kiln::KilnDialect::getKernelAttrName(), UnitAttr::get(ctx));
  s.builder.setInsertionPointToEnd(s.func.addEntryBlock());
  s.traced = std::move(traced);
}

V param(int index) { return wrap(st().func.getArgument(index)); }

bool tracing() noexcept { return state != nullptr; }

void abort_kernel() noexcept { state.reset(); }

TracedModulePtr end_kernel() {
  auto &s = st();
  if (!s.loops.empty())
    throw Error("kiln: kernel ended inside an unfinished for_range");
  func::ReturnOp::create(s.builder, loc());
  TracedModulePtr traced = std::move(s.traced);
  state.reset();
  DiagnosticCollector diags(traced->context.get());
  if (failed(mlir::verify(*traced->module)))
    throw Error("kiln: traced kernel '" + traced->name + "' is invalid:\n" + diags.str());
  return traced;
}

std::string kernel_name_from_type(const char *mangled) {
  int status = 0;
  char *demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // Drop namespace qualifiers everywhere, including inside template arguments.
  full = std::regex_replace(full, std::regex("[A-Za-z_][A-Za-z0-9_]*::"), "");
  // Keep the last component of the qualified name; template arguments become
  // suffixes: `ops::RowSoftmax<1024>` -> `RowSoftmax_1024`.
  std::string name;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    char c = full[i];
    if (c == '<') ++depth;
    else if (c == '>') --depth;
    else if (depth == 0 && c == ':') start = i + 1;
  }
  for (char c : full.substr(start)) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      name += c;
    else if (!name.empty() && name.back() != '_')
      name += '_';
  }
  while (!name.empty() && name.back() == '_')
    name.pop_back();
  return name.empty() ? "kernel" : name;
}

V constant(DType t, double value, std::span<const int> shape) {
  MLIRContext *ctx = b().getContext();
  Type elem = scalarType(ctx, t);
  TypedAttr attr;
  if (auto ft = dyn_cast<FloatType>(elem))
    attr = FloatAttr::get(ft, value);
  else
    attr = IntegerAttr::get(elem, APInt(elem.getIntOrFloatBitWidth(), int64_t(value), true, true));
  if (shape.empty())
    return wrap(arith::ConstantOp::create(b(), loc(), attr));
  auto type = RankedTensorType::get(toShape(shape), elem);
  return wrap(arith::ConstantOp::create(b(), loc(), SplatElementsAttr::get(type, attr)));
}

V program_id(int axis) {
  if (axis < 0 || axis > 2)
    throw Error("kiln::program_id: axis must be 0, 1 or 2, got " + std::to_string(axis));
  return wrap(kiln::ProgramIdOp::create(b(), loc(), b().getI32Type(), axis));
}

V num_programs(int axis) {
  if (axis < 0 || axis > 2)
    throw Error("kiln::num_programs: axis must be 0, 1 or 2, got " + std::to_string(axis));
  return wrap(kiln::NumProgramsOp::create(b(), loc(), b().getI32Type(), axis));
}

V make_range(int start, int end) {
  auto type = RankedTensorType::get({end - start}, b().getI32Type());
  return wrap(kiln::MakeRangeOp::create(b(), loc(), type, start, end));
}

V broadcast_to(V v, std::span<const int> shape) {
  Value x = val(v);
  auto target = toShape(shape);
  Type elem = kiln::getElementTypeOrSelf(x.getType());
  if (target.empty()) {
    if (!shapeOf(x).empty())
      throw Error("kiln: cannot broadcast a tile to a scalar");
    return v;
  }
  auto dstType = RankedTensorType::get(target, elem);
  if (x.getType() == dstType)
    return v;
  if (!isa<RankedTensorType>(x.getType()))
    return wrap(kiln::SplatOp::create(b(), loc(), dstType, x));
  auto src = cast<RankedTensorType>(x.getType());
  if (src.getRank() < int64_t(target.size())) {
    SmallVector<int64_t> padded(target.size() - src.getRank(), 1);
    padded.append(src.getShape().begin(), src.getShape().end());
    x = kiln::ReshapeOp::create(b(), loc(), RankedTensorType::get(padded, elem), x);
  }
  if (x.getType() == dstType)
    return wrap(x);
  return wrap(kiln::BroadcastOp::create(b(), loc(), dstType, x));
}

V expand_dims(V v, int axis) {
  Value x = val(v);
  SmallVector<int64_t> shape(shapeOf(x));
  if (axis < 0 || axis > int(shape.size()))
    throw Error("kiln::expand_dims: axis out of range");
  shape.insert(shape.begin() + axis, 1);
  auto type = RankedTensorType::get(shape, kiln::getElementTypeOrSelf(x.getType()));
  if (!isa<RankedTensorType>(x.getType()))
    return wrap(kiln::SplatOp::create(b(), loc(), type, x));
  return wrap(kiln::ExpandDimsOp::create(b(), loc(), type, x, axis));
}

V reshape(V v, std::span<const int> shape) {
  Value x = val(v);
  auto type = RankedTensorType::get(toShape(shape), kiln::getElementTypeOrSelf(x.getType()));
  if (!isa<RankedTensorType>(x.getType()))
    return wrap(kiln::SplatOp::create(b(), loc(), type, x));
  return wrap(kiln::ReshapeOp::create(b(), loc(), type, x));
}

V trans(V v) {
  Value x = val(v);
  auto src = cast<RankedTensorType>(x.getType());
  auto type = RankedTensorType::get({src.getDimSize(1), src.getDimSize(0)}, src.getElementType());
  return wrap(kiln::TransOp::create(b(), loc(), type, x));
}

V binary(BinOp op, V va, V vb) {
  Value x = val(va), y = val(vb);
  OpBuilder &bb = b();
  Location l = loc();
  bool fp = isFloatLike(x);
  switch (op) {
  case BinOp::Add: return wrap(fp ? Value(arith::AddFOp::create(bb, l, x, y)) : Value(arith::AddIOp::create(bb, l, x, y)));
  case BinOp::Sub: return wrap(fp ? Value(arith::SubFOp::create(bb, l, x, y)) : Value(arith::SubIOp::create(bb, l, x, y)));
  case BinOp::Mul: return wrap(fp ? Value(arith::MulFOp::create(bb, l, x, y)) : Value(arith::MulIOp::create(bb, l, x, y)));
  case BinOp::Div: return wrap(fp ? Value(arith::DivFOp::create(bb, l, x, y)) : Value(arith::DivSIOp::create(bb, l, x, y)));
  case BinOp::Rem: return wrap(fp ? Value(arith::RemFOp::create(bb, l, x, y)) : Value(arith::RemSIOp::create(bb, l, x, y)));
  case BinOp::Max: return wrap(fp ? Value(arith::MaximumFOp::create(bb, l, x, y)) : Value(arith::MaxSIOp::create(bb, l, x, y)));
  case BinOp::Min: return wrap(fp ? Value(arith::MinimumFOp::create(bb, l, x, y)) : Value(arith::MinSIOp::create(bb, l, x, y)));
  case BinOp::And:
  case BinOp::Or:
  case BinOp::Xor:
    if (fp)
      throw Error("kiln: &, | and ^ need integer or mask tiles");
    if (op == BinOp::And) return wrap(arith::AndIOp::create(bb, l, x, y));
    if (op == BinOp::Or) return wrap(arith::OrIOp::create(bb, l, x, y));
    return wrap(arith::XOrIOp::create(bb, l, x, y));
  }
  throw Error("kiln: unknown binary operator");
}

V compare(CmpOp op, V va, V vb) {
  Value x = val(va), y = val(vb);
  if (isFloatLike(x)) {
    arith::CmpFPredicate p;
    switch (op) {
    case CmpOp::Lt: p = arith::CmpFPredicate::OLT; break;
    case CmpOp::Le: p = arith::CmpFPredicate::OLE; break;
    case CmpOp::Gt: p = arith::CmpFPredicate::OGT; break;
    case CmpOp::Ge: p = arith::CmpFPredicate::OGE; break;
    case CmpOp::Eq: p = arith::CmpFPredicate::OEQ; break;
    case CmpOp::Ne: p = arith::CmpFPredicate::UNE; break;
    }
    return wrap(arith::CmpFOp::create(b(), loc(), p, x, y));
  }
  arith::CmpIPredicate p;
  switch (op) {
  case CmpOp::Lt: p = arith::CmpIPredicate::slt; break;
  case CmpOp::Le: p = arith::CmpIPredicate::sle; break;
  case CmpOp::Gt: p = arith::CmpIPredicate::sgt; break;
  case CmpOp::Ge: p = arith::CmpIPredicate::sge; break;
  case CmpOp::Eq: p = arith::CmpIPredicate::eq; break;
  case CmpOp::Ne: p = arith::CmpIPredicate::ne; break;
  }
  return wrap(arith::CmpIOp::create(b(), loc(), p, x, y));
}

V unary(UnOp op, V va) {
  Value x = val(va);
  OpBuilder &bb = b();
  Location l = loc();
  switch (op) {
  case UnOp::Neg:
    if (isFloatLike(x))
      return wrap(arith::NegFOp::create(bb, l, x));
    {
      Value zero = arith::ConstantOp::create(bb, l, bb.getZeroAttr(x.getType()));
      return wrap(arith::SubIOp::create(bb, l, zero, x));
    }
  case UnOp::Not: {
    Type t = x.getType();
    Attribute one = isa<RankedTensorType>(t)
                        ? Attribute(SplatElementsAttr::get(cast<ShapedType>(t), bb.getBoolAttr(true)))
                        : Attribute(bb.getBoolAttr(true));
    Value ones = arith::ConstantOp::create(bb, l, cast<TypedAttr>(one));
    return wrap(arith::XOrIOp::create(bb, l, x, ones));
  }
  case UnOp::Exp: return wrap(math::ExpOp::create(bb, l, x));
  case UnOp::Exp2: return wrap(math::Exp2Op::create(bb, l, x));
  case UnOp::Log: return wrap(math::LogOp::create(bb, l, x));
  case UnOp::Sqrt: return wrap(math::SqrtOp::create(bb, l, x));
  case UnOp::Rsqrt: return wrap(math::RsqrtOp::create(bb, l, x));
  case UnOp::Tanh: return wrap(math::TanhOp::create(bb, l, x));
  case UnOp::TanhApprox:
    return wrap(math::TanhOp::create(bb, l, x, arith::FastMathFlagsAttr::get(bb.getContext(),
                                                                            arith::FastMathFlags::afn)));
  case UnOp::Erf: return wrap(math::ErfOp::create(bb, l, x));
  case UnOp::Sin: return wrap(math::SinOp::create(bb, l, x));
  case UnOp::Cos: return wrap(math::CosOp::create(bb, l, x));
  case UnOp::Floor: return wrap(math::FloorOp::create(bb, l, x));
  case UnOp::Ceil: return wrap(math::CeilOp::create(bb, l, x));
  case UnOp::Abs:
    return wrap(isFloatLike(x) ? Value(math::AbsFOp::create(bb, l, x))
                               : Value(math::AbsIOp::create(bb, l, x)));
  }
  throw Error("kiln: unknown unary operator");
}

V cast(V v, DType to) {
  Value x = val(v);
  Type dst = kiln::getSameShape(x.getType(), scalarType(b().getContext(), to));
  return wrap(kiln::CastOp::create(b(), loc(), dst, x));
}

V select(V c, V va, V vb) {
  return wrap(kiln::SelectOp::create(b(), loc(), val(c), val(va), val(vb)));
}

V addptr(V p, V off) {
  Value ptr = val(p);
  return wrap(kiln::AddPtrOp::create(b(), loc(), ptr.getType(), ptr, val(off)));
}

V load(V p, V mask, V other) {
  Value ptr = val(p);
  Type result = kiln::getPointeeType(ptr.getType());
  Value m = mask.impl ? val(mask) : Value();
  Value o = other.impl ? val(other) : Value();
  return wrap(kiln::LoadOp::create(b(), loc(), result, ptr, m, o));
}

void store(V p, V value, V mask) {
  Value m = mask.impl ? val(mask) : Value();
  kiln::StoreOp::create(b(), loc(), val(p), val(value), m);
}

void prefetch(V p, V mask) {
  kiln::PrefetchOp::create(b(), loc(), val(p), mask.impl ? val(mask) : Value());
}

V atomic_add(V p, V value) {
  return wrap(kiln::AtomicAddOp::create(b(), loc(), b().getI32Type(), val(p), val(value)));
}

void atomic_accumulate(V p, V value, V mask) {
  kiln::AtomicAccumulateOp::create(b(), loc(), val(p), val(value), mask.impl ? val(mask) : Value());
}

void grid_dependency_wait() { kiln::GridDependencyWaitOp::create(b(), loc()); }
void launch_dependents() { kiln::LaunchDependentsOp::create(b(), loc()); }

V dot(V a, V bv, V acc, bool tf32) {
  Value c = val(acc);
  auto dot = kiln::DotOp::create(b(), loc(), c.getType(), val(a), val(bv), c);
  dot.setTf32(tf32);
  return wrap(dot);
}

namespace {
kiln::ReduceKind kindOf(RedOp op) {
  return op == RedOp::Sum ? kiln::ReduceKind::Sum : op == RedOp::Max ? kiln::ReduceKind::Max : kiln::ReduceKind::Min;
}
} // namespace

V reduce(RedOp op, V v, int axis) {
  Value x = val(v);
  auto src = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(src.getShape());
  shape.erase(shape.begin() + axis);
  return wrap(kiln::ReduceOp::create(b(), loc(), withShape(src.getElementType(), shape), kindOf(op), x,
                                     axis));
}

V cluster_reduce(RedOp op, V v, int size) {
  return wrap(kiln::ClusterReduceOp::create(b(), loc(), kindOf(op), val(v), uint32_t(size)));
}

std::vector<V> cluster_gather(std::span<const V> values, int size) {
  SmallVector<Value> ins;
  SmallVector<Type> types;
  for (V v : values) {
    ins.push_back(val(v));
    SmallVector<int64_t> shape{size};
    if (auto tile = dyn_cast<RankedTensorType>(ins.back().getType()))
      llvm::append_range(shape, tile.getShape());
    types.push_back(RankedTensorType::get(shape, b().getF32Type()));
  }
  auto op = kiln::ClusterGatherOp::create(b(), loc(), types, ins, uint32_t(size));
  std::vector<V> out;
  for (Value r : op.getResults())
    out.push_back(wrap(r));
  return out;
}

V argmax(V v, int axis) {
  Value x = val(v);
  auto src = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(src.getShape());
  shape.erase(shape.begin() + axis);
  return wrap(kiln::ArgMaxOp::create(b(), loc(), withShape(b().getI32Type(), shape), x, axis));
}

LoopFrame begin_for(V lo, V hi, V step, std::span<const V> init) {
  SmallVector<Value> inits;
  for (V v : init)
    inits.push_back(val(v));
  auto &s = st();
  auto loop = scf::ForOp::create(s.builder, loc(), val(lo), val(hi), val(step), inits);
  Block *body = loop.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  s.builder.setInsertionPointToEnd(body);
  s.loops.push_back(loop);
  LoopFrame frame{wrap(loop.getInductionVar()), {}};
  for (Value arg : loop.getRegionIterArgs())
    frame.args.push_back(wrap(arg));
  return frame;
}

std::vector<V> end_for(std::span<const V> yields) {
  auto &s = st();
  if (s.loops.empty())
    throw Error("kiln: end of a for_range that was never begun");
  scf::ForOp loop = s.loops.back();
  s.loops.pop_back();
  SmallVector<Value> values;
  for (V v : yields)
    values.push_back(val(v));
  scf::YieldOp::create(s.builder, loc(), values);
  s.builder.setInsertionPointAfter(loop);
  std::vector<V> results;
  for (Value r : loop.getResults())
    results.push_back(wrap(r));
  return results;
}

} // namespace kiln::detail
