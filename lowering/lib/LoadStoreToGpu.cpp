//===- LoadStoreToGpu.cpp - loads, stores, atomics, rings, cp.async and TMA ===//
#include "GpuEmitter.h"

#include "ElementOps.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

namespace {
/// A fill of all-zero bits: what a predicated load leaves where it did not run.
bool isZeroFill(Value fill) { return matchPattern(fill, m_Zero()) || matchPattern(fill, m_PosZeroFloat()); }
} // namespace

// The helpers of GpuEmitter.h that emit GPU and NVVM ops, defined here (a
// file that includes those dialects anyway) rather than inline in the header.
void Emitter::barrierAll() { gpu::BarrierOp::create(b, loc); }

void Emitter::barrier() {
  if (state.producerThreads == 0)
    return barrierAll();
  Value id = i32(1);
  Value count = i32(threads);
  NVVM::BarrierOp::create(b, loc, TypeRange{}, id, count, {}, Value{});
}

void Emitter::fenceForAsyncProxy() {
  NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                             NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
}

LogicalResult Emitter::emitAddPtr(kiln::AddPtrOp ap) {
  Type pointee = cast<kiln::PtrType>(kiln::getElementTypeOrSelf(ap.getType())).getPointeeType();
  bool uniform = raw(ap.getPtr()).size() == 1 && raw(ap.getOffset()).size() == 1;
  Value size = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(byteSize(pointee)));
  auto &out = values[ap];
  for (int64_t j = 0; j < (uniform ? 1 : perThreadOf(ap.getType())); ++j) {
    Value off = elem(ap.getOffset(), j);
    if (off.getType().getIntOrFloatBitWidth() < 64)
      off = arith::ExtSIOp::create(b, loc, b.getI64Type(), off);
    Value bytes = arith::MulIOp::create(b, loc, off, size);
    out.push_back(arith::AddIOp::create(b, loc, elem(ap.getPtr(), j), bytes));
  }
  return success();
}

Value Emitter::globalPtr(Value addr) {
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1), addr);
}

Value Emitter::vectorizable(Value addr, int64_t bytes, ArrayRef<Value> masks, bool prefix) {
  Value fast = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, addr, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes - 1))),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  if (prefix && !masks.empty())
    return arith::AndIOp::create(b, loc, fast, masks.back());
  for (Value m : masks)
    fast = arith::AndIOp::create(b, loc, fast, m);
  return fast;
}

Value Emitter::predicatedLoad(Type type, Value addr, Value pred) {
  // The destination is zeroed first, so a load that does not run leaves 0.
  auto vec = dyn_cast<VectorType>(type);
  int64_t bytes = vec ? vec.getNumElements() * byteSize(vec.getElementType()) : byteSize(type);
  int64_t words = bytes / 4;
  const char *reg = bytes == 2 ? "h" : bytes == 8 ? "l" : "r";
  std::string text, constraints;
  int64_t outs = bytes <= 8 ? 1 : words;
  for (int64_t i = 0; i < outs; ++i) {
    text += "mov.b" + std::to_string(outs > 1 ? 32 : bytes * 8) + " $" + std::to_string(i) + ", 0;\n\t";
    constraints += std::string(i ? "," : "") + "=" + (outs > 1 ? "r" : reg);
  }
  text += "@$" + std::to_string(outs + 1) + " ld.global";
  if (outs > 1) {
    text += ".v" + std::to_string(outs) + ".b32 {";
    for (int64_t i = 0; i < outs; ++i)
      text += (i ? ", $" : "$") + std::to_string(i);
    text += "}";
  } else {
    text += ".b" + std::to_string(bytes * 8) + " $0";
  }
  text += ", [$" + std::to_string(outs) + "];";
  constraints += ",l,b";
  Type i32Type = b.getI32Type();
  Type word = outs > 1 ? i32Type : Type(b.getIntegerType(unsigned(bytes * 8)));
  Type result = outs > 1 ? Type(LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(outs, i32Type)))
                         : word;
  auto asmOp = LLVM::InlineAsmOp::create(b, loc, result, ValueRange{addr, pred}, text, constraints,
                                         /*has_side_effects=*/true, /*is_align_stack=*/false,
                                         LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                                         ArrayAttr());
  Value v = asmOp.getResult(0);
  if (outs > 1) {
    SmallVector<Value> parts;
    for (int64_t i = 0; i < outs; ++i)
      parts.push_back(LLVM::ExtractValueOp::create(b, loc, v, ArrayRef<int64_t>{i}));
    v = pack(parts);
  }
  return v.getType() == type ? v : Value(LLVM::BitcastOp::create(b, loc, type, v));
}

SmallVector<Value> Emitter::loadElements(Type elemType, ArrayRef<Value> addrs, ArrayRef<Value> masks,
                                         ArrayRef<Value> fills) {
  SmallVector<Value> parts;
  for (std::size_t i = 0; i < addrs.size(); ++i)
    parts.push_back(loadOne(elemType, addrs[i], masks.empty() ? Value() : masks[i],
                            fills.empty() ? Value() : fills[i]));
  return parts;
}

SmallVector<Value> Emitter::consecutive(Value first, int64_t width, Type elemType) {
  SmallVector<Value> addrs{first};
  for (int64_t k = 1; k < width; ++k)
    addrs.push_back(arith::AddIOp::create(
        b, loc, first, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(k * byteSize(elemType)))));
  return addrs;
}

SmallVector<Value> Emitter::loadGroup(Type elemType, bool prefix, ArrayRef<Value> groupAddrs, ArrayRef<Value> masks,
                             ArrayRef<Value> fills) {
  int64_t width = groupAddrs.size();
  // Offsets from the first address: loop-invariant code motion would
  // otherwise keep a base register pair per element for the slow path.
  SmallVector<Value> addrs = consecutive(groupAddrs[0], width, elemType);
  auto vecType = VectorType::get({width}, elemType);
  int64_t bytes = width * byteSize(elemType);
  Value fast = vectorizable(addrs[0], bytes, masks, prefix);
  bool predicable = bytes % 4 == 0 && bytes <= 16 && byteSize(elemType) >= 2 && !isa<kiln::PtrType>(elemType);
  // Past this many branches in one kernel, ptxas's register allocation
  // breaks down (a 12-chunk, 8-row decode product went from no spills to
  // 14 KB of them): later groups use the branch-free form below.
  constexpr int kMaxSlowPaths = 48;
  Value notFast;
  if (predicable)
    notFast = arith::XOrIOp::create(b, loc, fast, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  if (predicable && slowPaths < kMaxSlowPaths) {
    ++slowPaths;
    // A predicated vector load, in line, so that the loads of consecutive
    // groups are all in flight together; element loads only for a group that
    // cannot use it (misaligned or partly masked), behind a branch that is
    // rarely taken. Nothing on the common path reads the loaded registers,
    // so no thread waits for a load before issuing the next.
    Value v = predicatedLoad(vecType, addrs[0], fast);
    Value slow = notFast;
    // A masked-off group holds its fill: zeros are what the skipped vector
    // load left, other fills are taken on the slow path.
    if (!masks.empty() && llvm::all_of(fills, isZeroFill)) {
      Value any = masks[0];
      for (Value m : masks.drop_front())
        if (m != masks[0] && !prefix)
          any = arith::OrIOp::create(b, loc, any, m);
      slow = arith::AndIOp::create(b, loc, slow, any);
    }
    auto ifOp = scf::IfOp::create(
        b, loc, slow,
        [&](OpBuilder &bb, Location ll) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
          scf::YieldOp::create(b, ll, pack(loadElements(elemType, addrs, masks, fills)));
        },
        [&](OpBuilder &bb, Location ll) { scf::YieldOp::create(bb, ll, v); });
    SmallVector<Value> out;
    for (int64_t i = 0; i < width; ++i)
      out.push_back(LLVM::ExtractElementOp::create(b, loc, ifOp.getResult(0), i32(i)));
    return out;
  }
  if (predicable) {
    // Branch-free: the predicated vector load, and predicated element loads
    // for a group that cannot use it (more instructions on the common path).
    Value v = predicatedLoad(vecType, addrs[0], fast);
    SmallVector<Value> slowMasks;
    for (int64_t i = 0; i < width; ++i)
      slowMasks.push_back(masks.empty() ? notFast : Value(arith::AndIOp::create(b, loc, notFast, masks[i])));
    SmallVector<Value> parts = loadElements(elemType, addrs, slowMasks, fills);
    for (int64_t i = 0; i < width; ++i)
      parts[i] = arith::SelectOp::create(b, loc, fast, LLVM::ExtractElementOp::create(b, loc, v, i32(i)), parts[i]);
    return parts;
  }
  auto ifOp = scf::IfOp::create(
      b, loc, fast,
      [&](OpBuilder &bb, Location ll) {
        Value p = LLVM::IntToPtrOp::create(bb, ll, LLVM::LLVMPointerType::get(bb.getContext(), 1), addrs[0]);
        Value v = LLVM::LoadOp::create(bb, ll, vecType, p, bytes);
        SmallVector<Value> parts;
        for (int64_t i = 0; i < width; ++i)
          parts.push_back(LLVM::ExtractElementOp::create(
              bb, ll, v, arith::ConstantOp::create(bb, ll, bb.getI32IntegerAttr(i))));
        scf::YieldOp::create(bb, ll, parts);
      },
      [&](OpBuilder &bb, Location ll) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
        scf::YieldOp::create(b, ll, loadElements(elemType, addrs, masks, fills));
      });
  return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
}

Value Emitter::loadOne(Type elemType, Value addr, Value mask, Value fill) {
  int64_t bytes = byteSize(elemType);
  if (!mask || isa<kiln::PtrType>(elemType) || (bytes != 2 && bytes != 4 && bytes != 8))
    return kiln::emitMaskedLoad(b, loc, elemType, addr, mask, fill, /*addrSpace=*/1);
  // A predicated load rather than a branch around one: a branch makes the
  // thread wait for each load in turn where its value is used (a convert, a
  // select), so a few masked scalar loads would cost a memory round trip
  // each.
  Value v = predicatedLoad(b.getIntegerType(unsigned(bytes * 8)), addr, mask);
  if (v.getType() != elemType)
    v = LLVM::BitcastOp::create(b, loc, elemType, v);
  // The destination was zeroed: a zero fill needs no select.
  if (!fill || isZeroFill(fill))
    return v;
  return arith::SelectOp::create(b, loc, mask, v, fill);
}

LogicalResult Emitter::emitLoad(kiln::LoadOp ld) {
  Type elemType = kiln::getElementTypeOrSelf(ld.getType());
  if (elemType.isInteger(1))
    return ld.emitError("convert-kiln-to-gpu: loads of i1 are not supported");
  int64_t n, width;
  if (inSlice(ld.getType()) || mmaOf(ld.getType())) {
    // A slice of an accumulator layout (a bias row) or an accumulator layout
    // (a residual): column slices and accumulators hold columns in
    // consecutive pairs, one load for both (half the addresses and loads).
    n = perThreadOf(ld.getType());
    width = !rowsOf(ld.getType()) && byteSize(elemType) <= 4 ? 2 : 1;
  } else {
    Layout l = layoutOf(ld.getType());
    n = l.perThread;
    width = vectorWidth(l, elemType);
  }
  SmallVector<Value> ptrs = raw(ld.getPtr());
  SmallVector<Value> masks = ld.getMask() ? raw(ld.getMask()) : SmallVector<Value>{};
  SmallVector<Value> fills = ld.getOther() ? raw(ld.getOther()) : SmallVector<Value>{};
  SmallVector<Value> out;
  if (width > 1 && strideOf(ld.getPtr()) == 1) {
    for (int64_t j = 0; j < n; j += width) {
      SmallVector<Value> a, m, f;
      for (int64_t k = 0; k < width; ++k) {
        a.push_back(pick(ptrs, j + k));
        if (!masks.empty())
          m.push_back(pick(masks, j + k));
        if (!fills.empty())
          f.push_back(pick(fills, j + k));
      }
      auto part = loadGroup(elemType, ld.getMask() && isPrefix(ld.getMask()), a, m, f);
      out.append(part.begin(), part.end());
    }
  } else {
    for (int64_t j = 0; j < n; ++j)
      out.push_back(loadOne(elemType, pick(ptrs, j), masks.empty() ? Value() : pick(masks, j),
                            fills.empty() ? Value() : pick(fills, j)));
  }
  values[ld] = out;
  return success();
}

LogicalResult Emitter::emitStore(kiln::StoreOp st) {
  if (inSlice(st.getValue().getType()))
    return st.emitError("convert-kiln-to-gpu: a slice of an accumulator layout is stored through a "
                        "conversion to a blocked layout");
  Layout l = layoutOf(st.getValue().getType());
  Type elemType = kiln::getElementTypeOrSelf(st.getValue().getType());
  int64_t width = vectorWidth(l, elemType);
  // An element several threads hold is stored by one of them.
  Value owner = ownsElements(l);
  if (width > 1 && !owner && strideOf(st.getPtr()) == 1) {
    SmallVector<Value> ptrs = raw(st.getPtr()), vals = raw(st.getValue());
    SmallVector<Value> masks = st.getMask() ? raw(st.getMask()) : SmallVector<Value>{};
    int64_t bytes = width * byteSize(elemType);
    for (int64_t j = 0; j < l.perThread; j += width) {
      SmallVector<Value> part, groupMasks;
      for (int64_t k = 0; k < width; ++k) {
        part.push_back(pick(vals, j + k));
        if (!masks.empty())
          groupMasks.push_back(pick(masks, j + k));
      }
      Value fast = vectorizable(pick(ptrs, j), bytes, groupMasks, st.getMask() && isPrefix(st.getMask()));
      auto ifOp = scf::IfOp::create(b, loc, fast, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value p = globalPtr(pick(ptrs, j));
      LLVM::StoreOp::create(b, loc, pack(part), p, bytes);
      b.setInsertionPointToStart(ifOp.elseBlock());
      for (int64_t k = 0; k < width; ++k)
        storeOne(pick(ptrs, j + k), part[k], masks.empty() ? Value() : pick(masks, j + k));
    }
    return success();
  }
  SmallVector<Value> ptrs = raw(st.getPtr()), vals = raw(st.getValue());
  SmallVector<Value> masks = st.getMask() ? raw(st.getMask()) : SmallVector<Value>{};
  for (int64_t j = 0; j < l.perThread; ++j) {
    Value mask = masks.empty() ? Value() : pick(masks, j);
    if (!owner) {
      storeOne(pick(ptrs, j), pick(vals, j), mask);
      continue;
    }
    // Predicated rather than behind a branch: LLVM sinks what computes the
    // value into the branch, past any barrier before it, and what was read
    // from shared memory before the barrier stays live across it (decode
    // attention's merge went from 128 registers to 255 and spilled).
    predicatedStore(pick(ptrs, j), pick(vals, j),
                    mask ? Value(arith::AndIOp::create(b, loc, mask, owner)) : owner);
  }
  return success();
}

LogicalResult Emitter::emitAtomicAdd(kiln::AtomicAddOp op) {
  // Release: each thread's earlier stores reach GPU scope, then the barrier
  // orders them before thread 0's addition.
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acq_rel, "device");
  barrier();
  reserveSmem(4);
  onlyIf(ownsElements(layoutOf(op.getPtr().getType())), [&] {
    Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, globalPtr(raw(op.getPtr())[0]),
                                          raw(op.getValue())[0], LLVM::AtomicOrdering::acq_rel, "device");
    storeSmem(0, i32(0), old);
  });
  barrier();
  values[op] = {loadSmem(0, i32(0), b.getI32Type())};
  barrier();
  // Acquire, for every thread's later loads.
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acq_rel, "device");
  return success();
}

void Emitter::storeOne(Value addr, Value v, Value mask) {
  kiln::emitMaskedStore(b, loc, addr, v, mask, /*addrSpace=*/1);
}

void Emitter::predicatedStore(Value addr, Value v, Value pred) {
  // PTX stores from 16-, 32- or 64-bit registers; a byte from a 16-bit one.
  unsigned bits = v.getType().getIntOrFloatBitWidth();
  unsigned regBits = std::max(16u, bits);
  Value word = v;
  if (!v.getType().isInteger())
    word = LLVM::BitcastOp::create(b, loc, b.getIntegerType(bits), word);
  if (bits < regBits)
    word = arith::ExtUIOp::create(b, loc, b.getIntegerType(regBits), word);
  const char *reg = regBits == 16 ? "h" : regBits == 32 ? "r" : "l";
  std::string text = "@$2 st.global.b" + std::to_string(std::max(8u, bits)) + " [$0], $1;";
  LLVM::InlineAsmOp::create(b, loc, Type(), ValueRange{addr, word, pred}, text,
                            std::string("l,") + reg + ",b", /*has_side_effects=*/true,
                            /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

LogicalResult Emitter::emitAsyncCopy(kiln::AsyncCopyOp cp) {
  auto ringType = cast<kiln::SharedType>(cp.getRing().getType());
  RankedTensorType tile = ringType.getTileType();
  Type elemType = storageType(tile.getElementType());
  if (elemType.isInteger(1))
    return cp.emitError("convert-kiln-to-gpu: copies of i1 are not supported");
  SmemTile dst{ringBuffer(cp.getRing(), raw(cp.getStage())[0]), tile, keepsSwizzled(tile)};
  Layout l = layoutOf(cp.getPtr().getType());
  SmallVector<Value> ptrs = raw(cp.getPtr());
  SmallVector<Value> masks = cp.getMask() ? raw(cp.getMask()) : SmallVector<Value>{};
  SmallVector<Value> fills = cp.getOther() ? raw(cp.getOther()) : SmallVector<Value>{};
  auto at = [](ArrayRef<Value> vs, int64_t j) { return vs.empty() ? Value() : pick(vs, j); };
  int64_t width = vectorWidth(l, elemType);
  int64_t bytes = width * byteSize(elemType);
  if (bytes != 16 || strideOf(cp.getPtr()) != 1) {
    // Element by element, synchronously; the wait's barrier publishes them.
    for (int64_t j = 0; j < l.perThread; ++j) {
      Value v = loadOne(elemType, pick(ptrs, j), at(masks, j), at(fills, j));
      LLVM::StoreOp::create(b, loc, v, tileAddr(dst, tileIndex(dst, flatIndex(l, j))));
    }
    return success();
  }
  // One 16-byte cp.async per group when it is aligned and wholly unmasked;
  // otherwise masked element loads and one vector store (tails only).
  MLIRContext *ctx = b.getContext();
  for (int64_t j = 0; j < l.perThread; j += width) {
    SmallVector<Value> groupMasks;
    for (int64_t k = 0; k < width && !masks.empty(); ++k)
      groupMasks.push_back(pick(masks, j + k));
    Value fast = vectorizable(pick(ptrs, j), bytes, groupMasks, cp.getMask() && isPrefix(cp.getMask()));
    Value addr = tileAddr(dst, tileIndex(dst, flatIndex(l, j)));
    auto ifOp = scf::IfOp::create(b, loc, fast, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    NVVM::CpAsyncOp::create(b, loc, addr, globalPtr(pick(ptrs, j)), b.getI32IntegerAttr(16),
                            NVVM::LoadCacheModifierKindAttr::get(ctx, NVVM::LoadCacheModifierKind::CG),
                            Value());
    b.setInsertionPointToStart(ifOp.elseBlock());
    SmallVector<Value> part, addrs = consecutive(pick(ptrs, j), width, elemType);
    for (int64_t k = 0; k < width; ++k)
      part.push_back(loadOne(elemType, addrs[k], at(masks, j + k), at(fills, j + k)));
    LLVM::StoreOp::create(b, loc, pack(part), addr, bytes);
  }
  return success();
}

LogicalResult Emitter::emitLocalLoad(kiln::LocalLoadOp ll) {
  RankedTensorType tile = ll.getType();
  SmemTile t{ringBuffer(ll.getRing(), raw(ll.getStage())[0]), tile, keepsSwizzled(tile)};
  // A #kiln.shared result is read in place by the products (its lowered
  // value is the buffer's byte offset); otherwise the tile is read into
  // registers.
  if (isa<kiln::SharedLayoutAttr>(kiln::getLayout(tile))) {
    values[ll] = {t.base};
    return success();
  }
  Layout l = layoutOf(tile);
  Type elemType = storageType(tile.getElementType());
  auto &out = values[ll];
  for (int64_t j = 0; j < l.perThread; ++j)
    out.push_back(LLVM::LoadOp::create(b, loc, elemType, tileAddr(t, tileIndex(t, flatIndex(l, j)))));
  return success();
}

LogicalResult Emitter::emitLocalAlloc(kiln::LocalAllocOp alloc) {
  values[alloc] = {i32(state.ringOffsets.at(alloc))};
  return success();
}

LogicalResult Emitter::emitAsyncGroup(Operation *op) {
  if (isa<kiln::AsyncCommitOp>(op)) {
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    return success();
  }
  NVVM::CpAsyncWaitGroupOp::create(b, loc, cast<kiln::AsyncWaitOp>(op).getPending());
  if (state.asyncProxyReads) // this thread's writes, before wgmma reads them
    fenceForAsyncProxy();
  barrier();
  return success();
}

namespace {
/// Inline PTX without results.
void inlinePtx(OpBuilder &b, Location loc, ValueRange operands, const std::string &text,
               const std::string &constraints) {
  LLVM::InlineAsmOp::create(b, loc, Type(), operands, text, constraints, /*has_side_effects=*/true,
                            /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}
} // namespace

Value Emitter::barrierAddr(Value barriers, Value index) {
  Value offset = ringBuffer(barriers, index);
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), smemPtr(offset));
}

Value Emitter::electedThread(Operation *op, Value pred) {
  // The producer warps run the then-region of the branch that splits them
  // from the program's warps (which run its else-region).
  bool producer = false;
  for (Region *r = op->getParentRegion(); r && !producer; r = r->getParentRegion())
    producer = r->getParentOp()->hasAttr(kProducerBranchName) && r->getRegionNumber() == 0;
  Value first = producer ? Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, state.entryTid,
                                                       i32(threads)))
                         : isZero(tid);
  return pred ? Value(arith::AndIOp::create(b, loc, first, pred)) : first;
}

LogicalResult Emitter::emitBarrier(kiln::BarrierOp) {
  barrier();
  return success();
}

LogicalResult Emitter::emitGridDependencyWait(kiln::GridDependencyWaitOp) {
  inlinePtx(b, loc, {}, "griddepcontrol.wait;", "~{memory}");
  return success();
}

LogicalResult Emitter::emitPrefetch(kiln::PrefetchOp op) {
  if (inSlice(op.getPtr().getType()) || mmaOf(op.getPtr().getType()))
    return op.emitError("convert-kiln-to-gpu: prefetch takes pointers in a blocked layout, not an "
                        "accumulator's or a slice of one");
  Layout l = layoutOf(op.getPtr().getType());
  // An element several threads hold is prefetched by one of them.
  Value owner = ownsElements(l);
  SmallVector<Value> ptrs = raw(op.getPtr());
  SmallVector<Value> masks = op.getMask() ? raw(op.getMask()) : SmallVector<Value>{};
  for (int64_t j = 0; j < l.perThread; ++j) {
    Value pred = both(masks.empty() ? Value() : pick(masks, j), owner);
    if (pred)
      inlinePtx(b, loc, {pick(ptrs, j), pred}, "@$1 prefetch.global.L2 [$0];", "l,b");
    else
      inlinePtx(b, loc, {pick(ptrs, j)}, "prefetch.global.L2 [$0];", "l");
  }
  return success();
}

LogicalResult Emitter::emitAtomicAccumulate(kiln::AtomicAccumulateOp op) {
  if (inSlice(op.getPtr().getType()) || mmaOf(op.getPtr().getType()))
    return op.emitError("convert-kiln-to-gpu: atomic_accumulate takes pointers in a blocked layout, not "
                        "an accumulator's or a slice of one");
  Layout l = layoutOf(op.getPtr().getType());
  // An element several threads hold is added by one of them. Predicated
  // reductions, not branches (see emitStore).
  Value owner = ownsElements(l);
  SmallVector<Value> ptrs = raw(op.getPtr()), vals = raw(op.getValue());
  SmallVector<Value> masks = op.getMask() ? raw(op.getMask()) : SmallVector<Value>{};
  for (int64_t j = 0; j < l.perThread; ++j) {
    Value pred = both(masks.empty() ? Value() : pick(masks, j), owner);
    if (pred)
      inlinePtx(b, loc, {pick(ptrs, j), pick(vals, j), pred}, "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;",
                "l,f,b,~{memory}");
    else
      inlinePtx(b, loc, {pick(ptrs, j), pick(vals, j)}, "red.relaxed.gpu.global.add.f32 [$0], $1;",
                "l,f,~{memory}");
  }
  return success();
}

LogicalResult Emitter::emitLaunchDependents(kiln::LaunchDependentsOp) {
  inlinePtx(b, loc, {}, "griddepcontrol.launch_dependents;", "~{memory}");
  return success();
}

void Emitter::clusterBarrier() {
  inlinePtx(b, loc, {}, "barrier.cluster.arrive.release.aligned;", "~{memory}");
  inlinePtx(b, loc, {}, "barrier.cluster.wait.acquire.aligned;", "~{memory}");
}

Value Emitter::loadFromRank(Value own, Value rank) {
  auto asmOp = [&](Type result, ValueRange operands, const char *text, const char *constraints, bool effects) {
    return LLVM::InlineAsmOp::create(b, loc, result, operands, text, constraints, effects,
                                     /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                     LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  };
  Value remote = asmOp(b.getI32Type(), {own, rank}, "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", false);
  return asmOp(b.getF32Type(), {remote}, "ld.shared::cluster.f32 $0, [$1];", "=f,r,~{memory}", true);
}

LogicalResult Emitter::emitClusterReduce(kiln::ClusterReduceOp op) {
  // (convertKernel refuses it in kernels with producer warps.)
  Value v = raw(op.getValue())[0];
  // Thread 0 publishes the program's value in its shared memory, once
  // every thread has left the scratch area's previous use.
  barrier();
  reserveSmem(4);
  onlyIf(isZero(tid), [&] { storeSmem(0, i32(0), v); });
  // Every program's value published (release by each thread, acquire
  // before the reads below).
  clusterBarrier();
  Value own = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), smemAddr(0, i32(0), b.getF32Type()));
  // Each thread reads the cluster's values, all loads in flight at once,
  // and combines them in rank order, so that every program gets the same
  // bits.
  SmallVector<Value> all;
  for (uint32_t rank = 0; rank < op.getSize(); ++rank)
    all.push_back(loadFromRank(own, i32(rank)));
  Value x = all.front();
  for (Value y : ArrayRef<Value>(all).drop_front())
    x = combine(op.getKind(), x, y);
  // No program overwrites its value (a later exchange) or exits, ending
  // its shared memory, before the whole cluster has read it.
  clusterBarrier();
  values[op] = {x};
  return success();
}

LogicalResult Emitter::emitClusterGather(kiln::ClusterGatherOp op) {
  auto registers = [&](Type t) { return !mmaOf(t) && !inSlice(t); };
  for (Value v : op->getOperands())
    if (!registers(v.getType()))
      return op.emitError("convert-kiln-to-gpu: cluster_gather takes values in a blocked layout, not ") << v.getType();
  for (Value r : op->getResults())
    if (!registers(r.getType()))
      return op.emitError("convert-kiln-to-gpu: cluster_gather gives values in a blocked layout, not ") << r.getType();
  // The values one after the other in the scratch area, published once
  // every thread has left its previous use; an element several threads
  // hold is written by one of them.
  barrier();
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;
  for (Value v : op.getValues()) {
    offsets.push_back(bytes);
    bytes += layoutOf(v.getType()).numel * 4;
  }
  reserveSmem(bytes);
  for (auto [v, offset] : llvm::zip(op.getValues(), offsets)) {
    Layout l = layoutOf(v.getType());
    onlyIf(ownsElements(l), [&, v = v, offset = offset] {
      for (int64_t j = 0; j < l.perThread; ++j)
        storeSmem(offset, flatIndex(l, j), elem(v, j));
    });
  }
  clusterBarrier();
  // Element (r, k) of a result is element k of the value in the program of
  // rank r: each thread loads the elements it holds, all in flight at once.
  for (auto [r, offset] : llvm::zip(op.getResults(), offsets)) {
    Layout l = layoutOf(r.getType());
    int64_t perRank = l.numel / op.getSize();
    SmallVector<Value> out;
    for (int64_t j = 0; j < l.perThread; ++j) {
      Value flat = flatIndex(l, j);
      Value rank = arith::DivUIOp::create(b, loc, flat, i32(perRank));
      Value k = arith::RemUIOp::create(b, loc, flat, i32(perRank));
      Value own = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), smemAddr(offset, k, b.getF32Type()));
      out.push_back(loadFromRank(own, rank));
    }
    values[r] = std::move(out);
  }
  clusterBarrier();
  return success();
}

LogicalResult Emitter::emitMBarrierInit(kiln::MBarrierInitOp op) {
  auto ring = cast<kiln::SharedType>(op.getBarriers().getType());
  onlyIf(isZero(state.entryTid), [&] {
    for (int64_t s = 0; s < ring.getStages(); ++s)
      inlinePtx(b, loc, {barrierAddr(op.getBarriers(), i32(s)), i32(op.getArrivals())},
                "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r");
    // The initialisation, before the async proxy (TMA) signals them.
    inlinePtx(b, loc, {}, "fence.mbarrier_init.release.cluster;", "");
  });
  barrierAll(); // before the program's warps and any producer warps split
  return success();
}

LogicalResult Emitter::emitMBarrierArrive(kiln::MBarrierArriveOp op) {
  Value given = op.getPred() ? raw(op.getPred())[0] : Value();
  Value pred;
  if (op.getPerWarp()) {
    // Lane 0 of each warp, once the warp's earlier work is done.
    pred = isZero(lane);
    if (given)
      pred = arith::AndIOp::create(b, loc, pred, given);
  } else {
    pred = electedThread(op, given);
  }
  inlinePtx(b, loc, {barrierAddr(op.getBarriers(), raw(op.getIndex())[0]), pred},
            "@$1 mbarrier.arrive.shared::cta.b64 _, [$0];", "r,b");
  return success();
}

LogicalResult Emitter::emitMBarrierWait(kiln::MBarrierWaitOp op) {
  inlinePtx(b, loc, {barrierAddr(op.getBarriers(), raw(op.getIndex())[0]), raw(op.getPhase())[0]},
            "{\n\t.reg .pred done;\n"
            "kiln_wait_${:uid}:\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n\t"
            "@!done bra kiln_wait_${:uid};\n\t}",
            "r,r");
  return success();
}

LogicalResult Emitter::emitAsyncTmaCopy(kiln::AsyncTmaCopyOp op) {
  RankedTensorType tile = cast<kiln::SharedType>(op.getRing().getType()).getTileType();
  int64_t panelCols = panelColsOf(elemBytesOf(tile));
  int64_t rows = tile.getDimSize(0), panels = tile.getDimSize(1) / panelCols;
  int64_t panelBytes = rows * 128;
  Value pred = electedThread(op, op.getPred() ? raw(op.getPred())[0] : Value());
  Value bar = barrierAddr(op.getBarriers(), raw(op.getBarrier())[0]);
  Value dst = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(),
                                       smemPtr(ringBuffer(op.getRing(), raw(op.getStage())[0])));
  Value map = raw(op.getMap())[0], row = raw(op.getRow())[0], col = raw(op.getCol())[0];
  inlinePtx(b, loc, {bar, pred},
            "@$1 mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], " +
                std::to_string(panelBytes * panels) + ";",
            "r,b");
  for (int64_t p = 0; p < panels; ++p) {
    Value to = arith::AddIOp::create(b, loc, dst, i32(p * panelBytes));
    Value x = arith::AddIOp::create(b, loc, col, i32(p * panelCols));
    inlinePtx(b, loc, {to, map, x, row, bar, pred},
              "@$5 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
              "[$0], [$1, {$2, $3}], [$4];",
              "r,l,r,r,r,b");
  }
  return success();
}

LogicalResult Emitter::emitTmaStore(kiln::TmaStoreOp op) {
  Value v = op.getValue();
  auto tile = cast<RankedTensorType>(v.getType());
  int64_t panelCols = panelColsOf(elemBytesOf(tile));
  int64_t rows = tile.getDimSize(0), panels = tile.getDimSize(1) / panelCols;
  int64_t panelBytes = rows * 128;
  // TMA's 128-byte swizzle repeats every 1024 bytes, from a 1024-byte
  // aligned buffer (shared memory itself is 1024-byte aligned).
  int64_t base = int64_t(llvm::alignTo(scratchBase, 1024)) - scratchBase;
  reserveSmem(base + spill(v, base, /*swizzle=*/true));
  // Ordinary writes, then reads by the async proxy: fenced by each writer,
  // published by the barrier.
  fenceForAsyncProxy();
  barrier();
  Value pred = electedThread(op, Value());
  Value src = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), smemPtr(i32(scratchBase + base)));
  Value map = raw(op.getMap())[0], row = raw(op.getRow())[0], col = raw(op.getCol())[0];
  for (int64_t p = 0; p < panels; ++p) {
    Value from = arith::AddIOp::create(b, loc, src, i32(p * panelBytes));
    Value x = arith::AddIOp::create(b, loc, col, i32(p * panelCols));
    inlinePtx(b, loc, {map, x, row, from, pred},
              "@$4 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", "l,r,r,r,b");
  }
  // The buffer is scratch memory the program reuses, and must outlive the
  // program: the copy has read it before anyone goes on.
  inlinePtx(b, loc, {pred}, "@$0 cp.async.bulk.commit_group;", "b");
  inlinePtx(b, loc, {pred}, "@$0 cp.async.bulk.wait_group.read 0;", "b");
  bool last = isa<gpu::GPUFuncOp, func::FuncOp>(op->getParentOp());
  for (Operation *next = op->getNextNode(); last && next && !next->hasTrait<OpTrait::IsTerminator>();
       next = next->getNextNode())
    last = isMemoryEffectFree(next);
  if (!last)
    barrier();
  return success();
}

void populateLoadStoreToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                                    RewritePatternSet &patterns) {
  addPattern<kiln::AddPtrOp, &Emitter::emitAddPtr>(patterns, converter, state);
  addPattern<kiln::LoadOp, &Emitter::emitLoad>(patterns, converter, state);
  addPattern<kiln::StoreOp, &Emitter::emitStore>(patterns, converter, state);
  addPattern<kiln::AtomicAddOp, &Emitter::emitAtomicAdd>(patterns, converter, state);
  addPattern<kiln::AtomicAccumulateOp, &Emitter::emitAtomicAccumulate>(patterns, converter, state);
  addPattern<kiln::LocalAllocOp, &Emitter::emitLocalAlloc>(patterns, converter, state);
  addPattern<kiln::AsyncCopyOp, &Emitter::emitAsyncCopy>(patterns, converter, state);
  addPattern<kiln::AsyncCommitOp, &Emitter::emitAsyncGroup>(patterns, converter, state);
  addPattern<kiln::AsyncWaitOp, &Emitter::emitAsyncGroup>(patterns, converter, state);
  addPattern<kiln::LocalLoadOp, &Emitter::emitLocalLoad>(patterns, converter, state);
  addPattern<kiln::BarrierOp, &Emitter::emitBarrier>(patterns, converter, state);
  addPattern<kiln::GridDependencyWaitOp, &Emitter::emitGridDependencyWait>(patterns, converter, state);
  addPattern<kiln::LaunchDependentsOp, &Emitter::emitLaunchDependents>(patterns, converter, state);
  addPattern<kiln::PrefetchOp, &Emitter::emitPrefetch>(patterns, converter, state);
  addPattern<kiln::ClusterReduceOp, &Emitter::emitClusterReduce>(patterns, converter, state);
  addPattern<kiln::ClusterGatherOp, &Emitter::emitClusterGather>(patterns, converter, state);
  addPattern<kiln::MBarrierInitOp, &Emitter::emitMBarrierInit>(patterns, converter, state);
  addPattern<kiln::MBarrierArriveOp, &Emitter::emitMBarrierArrive>(patterns, converter, state);
  addPattern<kiln::MBarrierWaitOp, &Emitter::emitMBarrierWait>(patterns, converter, state);
  addPattern<kiln::AsyncTmaCopyOp, &Emitter::emitAsyncTmaCopy>(patterns, converter, state);
  addPattern<kiln::TmaStoreOp, &Emitter::emitTmaStore>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
