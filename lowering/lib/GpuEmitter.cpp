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
    if (auto rows = rowsOf.find(src); rows != rowsOf.end() && holdsRows(dst.getType(), rows->second)) {
      values[dst] = raw(src); // (M) and (M, 1): the same rows
      rowsOf[dst] = rows->second;
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
  if (auto sel = dyn_cast<kiln::SelectOp>(op)) {
    OperandLayout common = commonLayout(sel->getOperands(), sel.getType());
    auto c = common.view(sel.getCondition()), t = common.view(sel.getTrueValue()),
         f = common.view(sel.getFalseValue());
    int64_t n = std::max({c.size(), t.size(), f.size()});
    SmallVector<Value> out;
    for (int64_t j = 0; j < n; ++j)
      out.push_back(arith::SelectOp::create(b, loc, pick(c, j), pick(t, j), pick(f, j)));
    values[sel] = out;
    common.assign(sel, n);
    return success();
  }
  if (auto cast = dyn_cast<kiln::CastOp>(op)) {
    OperandLayout common = commonLayout(cast->getOperands(), cast.getType());
    auto in = common.view(cast.getSrc());
    Type to = kiln::getElementTypeOrSelf(cast.getType());
    SmallVector<Value> out;
    for (Value x : in)
      out.push_back(kiln::emitCast(b, loc, x, to));
    values[cast] = out;
    common.assign(cast, out.size());
    return success();
  }
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
  // Operands in one layout: the accumulator layout (or a row slice of one)
  // if any operand has it.
  OperandLayout common = commonLayout(op->getOperands(), result.getType());
  SmallVector<SmallVector<Value>> operands;
  for (Value v : op->getOperands())
    operands.push_back(common.view(v));
  int64_t n = common.perThread();
  if (llvm::all_of(operands, [](auto &vs) { return vs.size() == 1; }))
    n = 1; // uniform operands (splats): one value serves every element
  SmallVector<Value> out;
  for (int64_t j = 0; j < n; ++j) {
    OperationState state(loc, op->getName());
    for (auto &vs : operands)
      state.addOperands(pick(vs, j));
    state.addTypes(elemType);
    state.addAttributes(op->getAttrs());
    out.push_back(b.create(state)->getResult(0));
  }
  values[result] = out;
  if (!common.assign(result, n)) {
    setStride(result, strideThrough(op));
    notePrefix(op);
  }
  return success();
}

Emitter::Foreseen Emitter::foresee(Value v, DenseMap<Value, Foreseen> &memo, int depth) {
  if (auto it = mma.find(v); it != mma.end())
    return {Foreseen::Accumulator, it->second};
  if (auto it = rowsOf.find(v); it != rowsOf.end())
    return {Foreseen::Rows, it->second};
  auto tile = dyn_cast<RankedTensorType>(v.getType());
  Operation *op = v.getDefiningOp();
  if (values.count(v) || !tile || !op || depth > 32)
    return {};
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  auto compute = [&]() -> Foreseen {
    if (auto dot = dyn_cast<kiln::DotOp>(op)) {
      if (std::optional<Mma> m = mmaFor(dot))
        return {Foreseen::Accumulator, *m};
      return {};
    }
    if (auto red = dyn_cast<kiln::ReduceOp>(op)) {
      Foreseen f = foresee(red.getSrc(), memo, depth + 1);
      if (f.kind == Foreseen::Accumulator && red.getSrc().getType().getRank() == 2 && red.getAxis() == 1)
        return {Foreseen::Rows, f.m};
      return {};
    }
    if (isa<kiln::ExpandDimsOp, kiln::ReshapeOp>(op)) {
      Foreseen f = foresee(op->getOperand(0), memo, depth + 1);
      return f.kind == Foreseen::Rows && holdsRows(tile, f.m) ? f : Foreseen{};
    }
    if (auto bc = dyn_cast<kiln::BroadcastOp>(op)) {
      Foreseen f = foresee(bc.getSrc(), memo, depth + 1);
      if (f.kind == Foreseen::Rows)
        if (std::optional<Mma> to = acrossRows(f.m, tile))
          return {Foreseen::Accumulator, *to};
      return {};
    }
    if (!sameShapeElementwise(op, v))
      return {};
    // As commonLayout decides: the first accumulator, else the first row slice.
    Foreseen rows;
    for (Value operand : op->getOperands()) {
      if (operand.getType() != kiln::getSameShape(tile, kiln::getElementTypeOrSelf(operand.getType())))
        continue;
      Foreseen f = foresee(operand, memo, depth + 1);
      if (f.kind == Foreseen::Accumulator)
        return f;
      if (f.kind == Foreseen::Rows && rows.kind == Foreseen::Default)
        rows = f;
    }
    return rows;
  };
  Foreseen f = compute();
  memo[v] = f;
  return f;
}

LogicalResult Emitter::emitFor(scf::ForOp forOp) {
  SmallVector<Value> inits;
  // Loop-carried tiles carry every element of their layout, even when the
  // initial value is uniform (a splat): iterations make them differ. A tile
  // that the body computes in an accumulator layout (or a row slice of one)
  // is carried in it, so that it does not go through shared memory twice
  // per iteration.
  auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
  SmallVector<OperandLayout> carried;
  DenseMap<Value, Foreseen> memo;
  for (auto [i, init] : llvm::enumerate(forOp.getInitArgs())) {
    OperandLayout layout{this, init.getType(), std::nullopt, std::nullopt};
    Foreseen f = foresee(yield.getOperand(i), memo, 0);
    auto tile = dyn_cast<RankedTensorType>(init.getType());
    if (f.kind == Foreseen::Accumulator && tile && tile.getShape() == ArrayRef<int64_t>{f.m.M, f.m.N})
      layout.m = f.m;
    else if (f.kind == Foreseen::Rows && holdsRows(init.getType(), f.m))
      layout.rows = f.m;
    carried.push_back(layout);
    SmallVector<Value> vs = layout.view(init);
    for (int64_t j = 0; j < layout.perThread(); ++j)
      inits.push_back(pick(vs, j));
  }
  auto loop = scf::ForOp::create(b, loc, get(forOp.getLowerBound())[0],
                                 get(forOp.getUpperBound())[0], get(forOp.getStep())[0], inits);
  Block *body = loop.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  values[forOp.getInductionVar()] = {loop.getInductionVar()};
  size_t pos = 0;
  for (auto [i, arg] : llvm::enumerate(forOp.getRegionIterArgs())) {
    int64_t count = carried[i].perThread();
    auto slice = loop.getRegionIterArgs().slice(pos, count);
    values[arg] = SmallVector<Value>(slice.begin(), slice.end());
    carried[i].assign(arg, count);
    pos += count;
  }
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(body);
    if (failed(emitBlock(*forOp.getBody())))
      return failure();
    SmallVector<Value> yields;
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      SmallVector<Value> vs = carried[i].view(v);
      for (int64_t j = 0; j < carried[i].perThread(); ++j)
        yields.push_back(pick(vs, j));
    }
    scf::YieldOp::create(b, loc, yields);
  }
  pos = 0;
  for (auto [i, res] : llvm::enumerate(forOp.getResults())) {
    int64_t count = carried[i].perThread();
    auto slice = loop.getResults().slice(pos, count);
    values[res] = SmallVector<Value>(slice.begin(), slice.end());
    carried[i].assign(res, count);
    pos += count;
  }
  return success();
}

SmallVector<Value> Emitter::toRows(Value v, const Mma &m) {
  auto it = rowsOf.find(v);
  if (it != rowsOf.end() && sameRows(it->second, m))
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

} // namespace kiln::gpu_lowering
