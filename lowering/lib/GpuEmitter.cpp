//===- GpuEmitter.cpp - emitter core: ops, element-wise, loops ----------===//
#include "GpuEmitter.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::run(func::FuncOp src, gpu::GPUFuncOp dst) {
  b.setInsertionPointToStart(&dst.getBody().front());
  Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  tid = arith::IndexCastOp::create(b, loc, b.getI32Type(), t);
  Value w = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
  lane = arith::RemUIOp::create(b, loc, tid, w);
  warp = arith::DivUIOp::create(b, loc, tid, w);
  for (auto [from, to] : llvm::zip(src.getArguments(), dst.getArguments()))
    values[from] = {to};
  allocateRings(src);
  if (failed(emitBlock(src.getBody().front())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  if (smemBytes > kMaxSmem)
    return src.emitError("kernel needs ")
           << smemBytes << " bytes of shared memory (limit " << kMaxSmem
           << "); use smaller blocks or fewer stages";
  if (smemBytes > 0) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    // extern __shared__, sized at launch from kiln_smem_bytes.
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/false, LLVM::Linkage::External,
                           kSmemName, Attribute(), /*alignment=*/128, /*addrSpace=*/3);
    LLVM::GlobalOp::create(b, loc, b.getI32Type(), /*isConstant=*/true, LLVM::Linkage::External,
                           kSmemBytesName, b.getI32IntegerAttr(int32_t(smemBytes)),
                           /*alignment=*/4, /*addrSpace=*/1);
  }
  return success();
}

void Emitter::allocateRings(func::FuncOp src) {
  int64_t offset = 0;
  src.walk([&](kiln::LocalAllocOp alloc) {
    auto ring = cast<kiln::SharedType>(alloc.getType());
    RankedTensorType tile = ring.getTileType();
    int64_t bytes = tile.getNumElements() * byteSize(storageType(tile.getElementType()));
    int64_t stride = (bytes + 127) / 128 * 128;
    rings[alloc] = Ring{offset, stride};
    offset += stride * ring.getStages();
  });
  scratchBase = offset;
  smemBytes = offset;
}

scf::ForOp Emitter::emitLoop(int64_t lb, int64_t ub, ValueRange inits,
                             function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, i32(lb), i32(ub), i32(1), inits);
  OpBuilder::InsertionGuard guard(b);
  Block *block = loop.getBody();
  if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
    block->back().erase();
  b.setInsertionPointToEnd(block);
  scf::YieldOp::create(b, loc, body(loop.getInductionVar(), loop.getRegionIterArgs()));
  return loop;
}

LogicalResult Emitter::emitBlock(Block &block) {
  for (Operation &op : block)
    if (failed(emitOp(&op)))
      return failure();
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  if (isa<func::ReturnOp, scf::YieldOp>(op))
    return success();
  // Tiles in shared memory are read by products (and viewed transposed, or
  // read into registers by a conversion), nothing else.
  if (!isa<kiln::DotOp, kiln::TransOp, kiln::ConvertLayoutOp>(op))
    for (Value v : op->getOperands())
      if (isa_and_nonnull<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType())))
        return op->emitError("convert-kiln-to-gpu: ")
               << op->getName() << " cannot read a tile in shared memory (" << v.getType() << ")";
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return emitConstant(c);
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
    return emitElementwise(op);
  if (auto pid = dyn_cast<kiln::ProgramIdOp>(op)) {
    Value v = gpu::BlockIdOp::create(b, loc, gpu::Dimension(pid.getAxis()));
    values[pid] = {arith::IndexCastOp::create(b, loc, b.getI32Type(), v)};
    return success();
  }
  if (auto np = dyn_cast<kiln::NumProgramsOp>(op)) {
    Value v = gpu::GridDimOp::create(b, loc, gpu::Dimension(np.getAxis()));
    values[np] = {arith::IndexCastOp::create(b, loc, b.getI32Type(), v)};
    return success();
  }
  if (auto r = dyn_cast<kiln::MakeRangeOp>(op)) {
    Layout l = layoutOf(r.getType());
    auto &out = values[r];
    for (int64_t j = 0; j < l.perThread; ++j)
      out.push_back(arith::AddIOp::create(b, loc, flatIndex(l, j), i32(r.getStart())));
    strides[r] = 1;
    return success();
  }
  if (auto s = dyn_cast<kiln::SplatOp>(op)) {
    values[s] = {get(s.getSrc())[0]};
    strides[s] = 0;
    return success();
  }
  if (isa<kiln::ExpandDimsOp, kiln::ReshapeOp>(op)) {
    // Same element count and row-major order; the layout may group
    // elements differently (the last dimension can change), so regroup
    // through shared memory when it does.
    Value src = op->getOperand(0), dst = op->getResult(0);
    if (rowsOf(src) || rowsOf(dst)) {
      if (!rowsOf(src) || !rowsOf(dst) || !sameRows(*rowsOf(src), *rowsOf(dst)))
        return op->emitError("convert-kiln-to-gpu: a row slice changes rows");
      values[dst] = raw(src); // (M) and (M, 1): the same rows
      return success();
    }
    Layout ls = layoutOf(src.getType()), ld = layoutOf(dst.getType());
    SmallVector<Value> in = get(src);
    if (in.size() == 1 || (ls.distributed == ld.distributed && ls.vec == ld.vec)) {
      values[dst] = in;
    } else {
      Type stored = storageType(kiln::getElementTypeOrSelf(src.getType()));
      reserveSmem(spill(src, 0));
      barrier();
      SmallVector<Value> out;
      for (int64_t j = 0; j < ld.perThread; ++j)
        out.push_back(loadSmem(0, flatIndex(ld, j), stored));
      barrier();
      values[dst] = out;
    }
    auto srcType = cast<RankedTensorType>(src.getType());
    auto dstType = cast<RankedTensorType>(dst.getType());
    if (srcType.getShape().back() == dstType.getShape().back())
      inheritAlongLastDim(dst, src);
    return success();
  }
  if (auto bc = dyn_cast<kiln::BroadcastOp>(op))
    return emitBroadcast(bc);
  if (auto t = dyn_cast<kiln::TransOp>(op))
    return emitTrans(t);
  if (auto ap = dyn_cast<kiln::AddPtrOp>(op))
    return emitAddPtr(ap);
  if (auto ld = dyn_cast<kiln::LoadOp>(op))
    return emitLoad(ld);
  if (isa<kiln::LocalAllocOp>(op))
    return success(); // placed by allocateRings
  if (auto cp = dyn_cast<kiln::AsyncCopyOp>(op))
    return emitAsyncCopy(cp);
  if (isa<kiln::AsyncCommitOp>(op)) {
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    return success();
  }
  if (auto wait = dyn_cast<kiln::AsyncWaitOp>(op)) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, wait.getPending());
    barrier();
    return success();
  }
  if (auto ll = dyn_cast<kiln::LocalLoadOp>(op))
    return emitLocalLoad(ll);
  if (auto st = dyn_cast<kiln::StoreOp>(op))
    return emitStore(st);
  if (auto at = dyn_cast<kiln::AtomicAddOp>(op))
    return emitAtomicAdd(at);
  if (isa<kiln::SelectOp, kiln::CastOp>(op))
    return emitElementwise(op);
  if (auto cvt = dyn_cast<kiln::ConvertLayoutOp>(op))
    return emitConvertLayout(cvt);
  if (auto red = dyn_cast<kiln::ReduceOp>(op))
    return emitReduce(red);
  if (auto am = dyn_cast<kiln::ArgMaxOp>(op))
    return emitArgMax(am);
  if (auto dot = dyn_cast<kiln::DotOp>(op))
    return emitDot(dot);
  return op->emitError("convert-kiln-to-gpu: unsupported operation");
}

LogicalResult Emitter::emitConstant(arith::ConstantOp c) {
  if (auto splat = dyn_cast<SplatElementsAttr>(c.getValue())) {
    values[c] = {arith::ConstantOp::create(b, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()))};
    strides[c] = 0;
    return success();
  }
  if (isa<RankedTensorType>(c.getType()))
    return c.emitError("convert-kiln-to-gpu: only splat tile constants are supported");
  values[c] = {b.clone(*c)->getResult(0)};
  return success();
}

LogicalResult Emitter::emitElementwise(Operation *op) {
  if (op->getNumResults() != 1)
    return op->emitError("convert-kiln-to-gpu: expected one result");
  Value result = op->getResult(0);
  Type elemType = kiln::getElementTypeOrSelf(result.getType());
  // Every operand has the result's layout (the layout passes made it so).
  SmallVector<SmallVector<Value>> operands;
  for (Value v : op->getOperands())
    operands.push_back(raw(v));
  int64_t n = perThreadOf(result.getType());
  if (llvm::all_of(operands, [](auto &vs) { return vs.size() == 1; }))
    n = 1; // uniform operands (splats): one value serves every element
  SmallVector<Value> out;
  for (int64_t j = 0; j < n; ++j) {
    if (auto sel = dyn_cast<kiln::SelectOp>(op)) {
      out.push_back(arith::SelectOp::create(b, loc, pick(operands[0], j), pick(operands[1], j),
                                            pick(operands[2], j)));
      continue;
    }
    if (isa<kiln::CastOp>(op)) {
      out.push_back(kiln::emitCast(b, loc, pick(operands[0], j), elemType));
      continue;
    }
    OperationState state(loc, op->getName());
    for (auto &vs : operands)
      state.addOperands(pick(vs, j));
    state.addTypes(elemType);
    state.addAttributes(op->getAttrs());
    out.push_back(b.create(state)->getResult(0));
  }
  values[result] = out;
  if (!mmaOf(result) && !rowsOf(result)) {
    setStride(result, strideThrough(op));
    notePrefix(op);
  }
  return success();
}

LogicalResult Emitter::emitFor(scf::ForOp forOp) {
  // Loop-carried tiles carry every element of their layout (the iteration
  // arguments' types say which), even when the initial value is uniform (a
  // splat): iterations make them differ.
  auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
  SmallVector<int64_t> counts;
  SmallVector<Value> inits;
  for (Value init : forOp.getInitArgs()) {
    counts.push_back(isa<RankedTensorType>(init.getType()) ? perThreadOf(init.getType()) : 1);
    SmallVector<Value> vs = raw(init);
    for (int64_t j = 0; j < counts.back(); ++j)
      inits.push_back(pick(vs, j));
  }
  auto loop = scf::ForOp::create(b, loc, get(forOp.getLowerBound())[0],
                                 get(forOp.getUpperBound())[0], get(forOp.getStep())[0], inits);
  Block *body = loop.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  values[forOp.getInductionVar()] = {loop.getInductionVar()};
  auto bind = [&](ValueRange from, ValueRange to) {
    size_t pos = 0;
    for (auto [i, v] : llvm::enumerate(from)) {
      auto slice = to.slice(pos, counts[i]);
      values[v] = SmallVector<Value>(slice.begin(), slice.end());
      pos += counts[i];
    }
  };
  bind(forOp.getRegionIterArgs(), loop.getRegionIterArgs());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(body);
    if (failed(emitBlock(*forOp.getBody())))
      return failure();
    SmallVector<Value> yields;
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      SmallVector<Value> vs = raw(v);
      for (int64_t j = 0; j < counts[i]; ++j)
        yields.push_back(pick(vs, j));
    }
    scf::YieldOp::create(b, loc, yields);
  }
  bind(forOp.getResults(), loop.getResults());
  return success();
}

SmallVector<Value> Emitter::toRows(Value v, const Mma &m) {
  if (std::optional<Mma> rows = rowsOf(v); rows && sameRows(*rows, m))
    return raw(v);
  if (isUniform(v))
    return raw(v);
  SmallVector<Value> out;
  auto tile = cast<RankedTensorType>(v.getType());
  auto rowIndex = [&](int64_t i) {
    SmallVector<Value> idx(tile.getRank(), i32(0));
    idx[0] = rowOf(m, i);
    return idx;
  };
  if (canRematerialize(v, 0)) {
    for (int64_t i = 0; i < rowsPerThread(m); ++i)
      out.push_back(rematerialize(v, rowIndex(i)));
    return out;
  }
  Type stored = storageType(tile.getElementType());
  reserveSmem(spill(v, 0));
  barrier();
  for (int64_t i = 0; i < rowsPerThread(m); ++i)
    out.push_back(loadSmem(0, rowOf(m, i), stored));
  barrier();
  return out;
}

SmallVector<Value> Emitter::toDefault(Value v, Type to) {
  auto tile = cast<RankedTensorType>(v.getType());
  Type stored = storageType(tile.getElementType());
  reserveSmem(spill(v, 0));
  barrier();
  Layout l = layoutOf(to);
  SmallVector<Value> out;
  for (int64_t j = 0; j < l.perThread; ++j)
    out.push_back(loadSmem(0, flatIndex(l, j), stored));
  barrier();
  return out;
}

LogicalResult Emitter::emitConvertLayout(kiln::ConvertLayoutOp op) {
  Value src = op.getSrc(), dst = op.getResult();
  Attribute from = kiln::getLayout(src.getType()), to = kiln::getLayout(dst.getType());
  // A tile for a product to read from shared memory: the product stages it
  // (see operandTile), in the scratch area it uses for its operands.
  if (isa<kiln::SharedLayoutAttr>(to))
    return success();
  if (isa<kiln::SharedLayoutAttr>(from)) {
    // A ring buffer read into registers.
    auto it = smemTiles.find(src);
    if (it == smemTiles.end() || mmaOf(dst) || rowsOf(dst))
      return op.emitError("convert-kiln-to-gpu: only ring buffers are read from shared memory into "
                          "a #kiln.blocked or #kiln.replicated layout");
    Layout l = layoutOf(dst.getType());
    Type elemType = storageType(it->second.type.getElementType());
    auto &out = values[dst];
    for (int64_t j = 0; j < l.perThread; ++j)
      out.push_back(LLVM::LoadOp::create(b, loc, elemType,
                                         tileAddr(it->second, tileIndex(it->second, flatIndex(l, j)))));
    return success();
  }
  if (auto operand = dyn_cast<kiln::DotOperandLayoutAttr>(to)) {
    // An accumulator whose warps hold whole rows is the A fragment of a
    // product with the same row split: nothing moves.
    std::optional<Mma> acc = mmaOf(src);
    auto parent = cast<kiln::MmaLayoutAttr>(operand.getParent());
    if (!acc || acc->wn != 1 || acc->wm != parent.getWarpsM())
      return op.emitError("convert-kiln-to-gpu: an A operand in registers must come from an "
                          "accumulator with the same warps on rows and one on columns");
    values[dst] = raw(src);
    return success();
  }
  if (isUniform(src)) {
    values[dst] = raw(src);
    return success();
  }
  if (std::optional<Mma> m = mmaOf(dst))
    values[dst] = toMma(src, *m);
  else if (std::optional<Mma> rows = rowsOf(dst))
    values[dst] = toRows(src, *rows);
  else if (mmaOf(src) || rowsOf(src))
    values[dst] = toDefault(src, dst.getType());
  else if (layoutOf(src.getType()).perThread == layoutOf(dst.getType()).perThread &&
           layoutOf(src.getType()).distributed == layoutOf(dst.getType()).distributed &&
           layoutOf(src.getType()).vec == layoutOf(dst.getType()).vec)
    values[dst] = raw(src);
  else
    return op.emitError("convert-kiln-to-gpu: unsupported conversion from ") << from << " to " << to;
  inheritAlongLastDim(dst, src);
  return success();
}

} // namespace kiln::gpu_lowering
