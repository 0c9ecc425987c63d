//===- GpuEmitter.cpp - emitter core: ops, element-wise, loops ----------===//
#include "GpuEmitter.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::run(func::FuncOp src, gpu::GPUFuncOp dst) {
  axis.emplace(src);
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
  if (isa<kiln::MakeRangeOp, kiln::SplatOp, kiln::ExpandDimsOp, kiln::ReshapeOp>(op))
    return emitShape(op);
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

} // namespace kiln::gpu_lowering
