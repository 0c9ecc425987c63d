//===- ControlFlowToGpu.cpp - scf.for with its carried tiles per thread ---===//
#include "GpuEmitter.h"

namespace kiln::gpu_lowering {

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
  auto loop = scf::ForOp::create(b, loc, raw(forOp.getLowerBound())[0],
                                 raw(forOp.getUpperBound())[0], raw(forOp.getStep())[0], inits);
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

} // namespace kiln::gpu_lowering
