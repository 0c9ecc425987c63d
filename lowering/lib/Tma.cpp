//===- Tma.cpp - 2-D blocks of kernel-argument tensors, for TMA copies -----===//
#include "Tma.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace kiln::tma {

namespace {

Value stripBroadcast(Value v) {
  while (auto bc = v.getDefiningOp<kiln::BroadcastOp>())
    v = bc.getSrc();
  return v;
}

/// The scalar every element of `v` equals, when `v` is a splat (possibly broadcast).
Value splatScalar(Value v) {
  if (auto sp = stripBroadcast(v).getDefiningOp<kiln::SplatOp>())
    return sp.getSrc();
  return {};
}

/// When element `idx` of tile `v` equals `start + idx[dim]` for every
/// index (a range along `dim`, constant along the other dimensions), that start.
std::optional<Start> matchRange(Value v, int64_t dim) {
  auto tile = dyn_cast<RankedTensorType>(v.getType());
  if (!tile)
    return std::nullopt;
  if (auto bc = v.getDefiningOp<kiln::BroadcastOp>()) {
    auto src = cast<RankedTensorType>(bc.getSrc().getType());
    if (src.getDimSize(dim) != tile.getDimSize(dim))
      return std::nullopt; // the range itself would be stretched
    return matchRange(bc.getSrc(), dim);
  }
  if (auto ed = v.getDefiningOp<kiln::ExpandDimsOp>()) {
    int64_t axis = int32_t(ed.getAxis());
    if (axis == dim)
      return std::nullopt;
    return matchRange(ed.getSrc(), dim > axis ? dim - 1 : dim);
  }
  if (auto mr = v.getDefiningOp<kiln::MakeRangeOp>()) {
    if (dim != 0)
      return std::nullopt;
    return Start{Value(), int64_t(int32_t(mr.getStart()))};
  }
  if (auto add = v.getDefiningOp<arith::AddIOp>()) {
    for (auto [x, y] : {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      Value s = splatScalar(y);
      if (!s)
        continue;
      std::optional<Start> inner = matchRange(x, dim);
      if (!inner)
        continue;
      if (IntegerAttr c; matchPattern(s, m_Constant(&c)))
        return Start{inner->value, inner->offset + c.getInt()};
      if (inner->value)
        return std::nullopt; // two scalar parts: not one start value
      return Start{s, inner->offset};
    }
  }
  return std::nullopt;
}

/// Whether `v` is an argument of the kernel (the function's entry block).
bool isKernelArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa<func::FuncOp>(arg.getOwner()->getParentOp());
}

/// `v < bound` along `dim` (a range compared with a splat kernel argument).
std::optional<std::pair<Start, Value>> matchBound(Value v, int64_t dim) {
  auto cmp = stripBroadcast(v).getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::slt ||
      cast<RankedTensorType>(cmp.getLhs().getType()).getDimSize(dim) !=
          cast<RankedTensorType>(v.getType()).getDimSize(dim))
    return std::nullopt;
  Value bound = splatScalar(cmp.getRhs());
  std::optional<Start> start = matchRange(cmp.getLhs(), dim);
  if (!bound || !start || !isKernelArgument(bound))
    return std::nullopt;
  return std::pair{*start, bound};
}

} // namespace

std::optional<Block> matchTmaBlock(Value ptrTile, Value mask, Value other, RankedTensorType tile) {
  Type elem = tile.getElementType();
  // Whole 128-byte swizzle panels of 16-bit or f32 elements (TF32 products).
  int64_t panelCols = elem.isF32() ? 32 : 64;
  if (tile.getRank() != 2 || !(elem.isF16() || elem.isBF16() || elem.isF32()) ||
      tile.getDimSize(1) % panelCols != 0 || tile.getDimSize(0) % 8 != 0 || tile.getDimSize(0) > 256 ||
      !mask)
    return std::nullopt;
  if (other) {
    Attribute c;
    if (!matchPattern(other, m_Constant(&c)) ||
        !(matchPattern(other, m_PosZeroFloat()) || matchPattern(other, m_Zero())))
      return std::nullopt;
  }
  // ptr = splat(base) + sum of offset terms (addptr chains, broadcasts and
  // additions in any order) = base + rowRange * stride + colRange.
  Value ptr = ptrTile, base;
  SmallVector<Value> terms;
  while (!base) {
    ptr = stripBroadcast(ptr);
    if (auto ap = ptr.getDefiningOp<kiln::AddPtrOp>()) {
      terms.push_back(ap.getOffset());
      ptr = ap.getPtr();
    } else if (auto sp = ptr.getDefiningOp<kiln::SplatOp>()) {
      base = sp.getSrc();
    } else {
      return std::nullopt;
    }
  }
  if (!isKernelArgument(base))
    return std::nullopt;
  SmallVector<Value> flat;
  while (!terms.empty()) {
    Value t = stripBroadcast(terms.pop_back_val());
    if (auto add = t.getDefiningOp<arith::AddIOp>()) {
      terms.append({add.getLhs(), add.getRhs()});
      continue;
    }
    flat.push_back(t);
  }
  if (flat.size() != 2)
    return std::nullopt;
  // A range spans the whole tile along its dimension (not one element stretched).
  auto spans = [&](Value v, int64_t dim) {
    return cast<RankedTensorType>(v.getType()).getDimSize(dim) == tile.getDimSize(dim);
  };
  std::optional<Block> found;
  for (auto [x, y] : {std::pair{flat[0], flat[1]}, std::pair{flat[1], flat[0]}}) {
    auto mul = x.getDefiningOp<arith::MulIOp>();
    std::optional<Start> col = spans(y, 1) ? matchRange(y, 1) : std::nullopt;
    if (!mul || !col)
      continue;
    for (auto [r, st] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
      Value stride = splatScalar(st);
      std::optional<Start> row = spans(r, 0) ? matchRange(r, 0) : std::nullopt;
      if (stride && row && isKernelArgument(stride))
        found = Block{cast<BlockArgument>(base), {}, {}, cast<BlockArgument>(stride), *row, *col};
    }
  }
  if (!found)
    return std::nullopt;
  // mask = (rowRange < rows) & (colRange < cols), in either order.
  auto both = stripBroadcast(mask).getDefiningOp<arith::AndIOp>();
  if (!both)
    return std::nullopt;
  for (auto [x, y] : {std::pair{both.getLhs(), both.getRhs()}, std::pair{both.getRhs(), both.getLhs()}}) {
    auto rows = matchBound(x, 0);
    auto cols = matchBound(y, 1);
    if (rows && cols && rows->first == found->row && cols->first == found->col) {
      found->rows = cast<BlockArgument>(rows->second);
      found->cols = cast<BlockArgument>(cols->second);
      return found;
    }
  }
  return std::nullopt;
}

Value addTensorMap(func::FuncOp func, const Block &block, RankedTensorType tile, Location loc) {
  MLIRContext *ctx = func.getContext();
  Builder b(ctx);
  auto recipe = b.getDictionaryAttr({
      b.getNamedAttr("base", b.getI32IntegerAttr(int32_t(block.base.getArgNumber()))),
      b.getNamedAttr("rows", b.getI32IntegerAttr(int32_t(block.rows.getArgNumber()))),
      b.getNamedAttr("cols", b.getI32IntegerAttr(int32_t(block.cols.getArgNumber()))),
      b.getNamedAttr("stride", b.getI32IntegerAttr(int32_t(block.stride.getArgNumber()))),
      b.getNamedAttr("box", b.getDenseI32ArrayAttr(
                                {int32_t(tile.getDimSize(0)), tile.getElementType().isF32() ? 32 : 64})),
  });
  unsigned index = func.getNumArguments();
  auto attrs = b.getDictionaryAttr({b.getNamedAttr(kiln::KilnDialect::getTensorMapAttrName(), recipe)});
  if (failed(func.insertArgument(index, kiln::TensorMapType::get(ctx), attrs, loc)))
    return {};
  return func.getArgument(index);
}

Value materialize(OpBuilder &b, Location loc, const Start &s, const IRMapping *map) {
  Value v = s.value && map ? map->lookupOrDefault(s.value) : s.value;
  if (v && !s.offset)
    return v;
  Value offset = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(s.offset)));
  return v ? Value(arith::AddIOp::create(b, loc, v, offset)) : offset;
}

} // namespace kiln::tma
