//===- DotToGpu.cpp - kiln.dot on tensor cores or as an FMA loop ---------===//
#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::gpu_lowering {

LogicalResult Emitter::emitDot(kiln::DotOp dot) {
  if (std::optional<Mma> m = mmaOf(dot.getResult())) {
    if (cast<kiln::MmaLayoutAttr>(kiln::getLayout(dot.getType())).getVersion() == 3)
      return emitWgmmaDot(dot, *m);
    return emitMmaDot(dot, *m);
  }
  if (!isa<kiln::BlockedLayoutAttr, kiln::ReplicatedLayoutAttr>(kiln::getLayout(dot.getType())))
    return dot.emitError("convert-kiln-to-gpu: a product without tensor cores needs a #kiln.blocked "
                         "or #kiln.replicated accumulator");
  auto at = dot.getA().getType(), bt = dot.getB().getType();
  int64_t K = at.getDimSize(1), N = bt.getDimSize(1);
  Type in = at.getElementType();
  int64_t aBytes = spill(dot.getA(), 0);
  int64_t bBase = (aBytes + 15) / 16 * 16;
  reserveSmem(bBase + spill(dot.getB(), bBase));
  barrier();
  Layout lc = layoutOf(dot.getType());
  Type f32 = b.getF32Type();
  auto widen = [&](Value v) { return in.isF32() ? v : Value(arith::ExtFOp::create(b, loc, f32, v)); };
  auto &out = values[dot];
  for (int64_t j = 0; j < lc.perThread; ++j) {
    Value flat = flatIndex(lc, j);
    Value m = arith::DivSIOp::create(b, loc, flat, i32(N));
    Value n = arith::RemSIOp::create(b, loc, flat, i32(N));
    Value aRow = arith::MulIOp::create(b, loc, m, i32(K));
    auto loop = emitLoop(0, K, ValueRange{elem(dot.getAcc(), j)}, [&](Value k, ValueRange acc) {
      Value av = loadSmem(0, arith::AddIOp::create(b, loc, aRow, k), in);
      Value bv = loadSmem(bBase, arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, k, i32(N)), n), in);
      return SmallVector<Value>{math::FmaOp::create(b, loc, widen(av), widen(bv), acc[0])};
    });
    out.push_back(loop.getResult(0));
  }
  barrier();
  return success();
}

Emitter::SmemTile Emitter::operandTile(Value v, int64_t &scratchOffset, int64_t align) {
  if (auto ll = v.getDefiningOp<kiln::LocalLoadOp>())
    return ringTile(ll);
  auto layout = cast<kiln::SharedLayoutAttr>(kiln::getLayout(v.getType()));
  if (auto t = v.getDefiningOp<kiln::TransOp>(); t && layout.getTransposed()) {
    SmemTile tile = operandTile(t.getSrc(), scratchOffset, align);
    tile.transposed = true;
    return tile;
  }
  // A tile converted to shared memory: its source, staged in scratch.
  auto cvt = v.getDefiningOp<kiln::ConvertLayoutOp>();
  Value src = cvt ? cvt.getSrc() : v;
  auto tile = cast<RankedTensorType>(src.getType());
  int64_t base = llvm::alignTo(scratchOffset, align);
  if (layout.getTransposed()) {
    // Staged as its transpose (a TF32 product's B, read K-major): straight
    // from its ring buffer when it was read from one, else from registers.
    auto ll = src.getDefiningOp<kiln::LocalLoadOp>();
    int64_t copied = ll && layout.getSwizzle() ? copyTransposed(ll, base) : 0;
    scratchOffset = base + (copied ? copied : spillTransposed(src, base, layout.getSwizzle()));
    auto stored = RankedTensorType::get({tile.getDimSize(1), tile.getDimSize(0)}, tile.getElementType());
    return SmemTile{i32(scratchBase + base), stored, layout.getSwizzle(), /*transposed=*/true};
  }
  scratchOffset = base + spill(src, base, layout.getSwizzle());
  return SmemTile{i32(scratchBase + base), tile, layout.getSwizzle()};
}

LogicalResult Emitter::emitMmaDot(kiln::DotOp dot, const Mma &m) {
  auto at = dot.getA().getType();
  int64_t K = at.getDimSize(1);
  Type in = at.getElementType();
  SmallVector<Value> acc = raw(dot.getAcc());
  // Operands from a ring are read in place (the ring's wait synchronised the
  // program); others are staged in scratch first.
  int64_t scratch = 0;
  // A in #kiln.dot_operand: an accumulator whose warps hold the same whole
  // rows as this product's (the probabilities of attention); accumulator
  // tiles 2kk and 2kk + 1 of a 16-row block are the A fragment at k = 16kk,
  // in registers.
  bool aInRegisters = isa<kiln::DotOperandLayoutAttr>(kiln::getLayout(dot.getA().getType()));
  if (!aInRegisters && !isa<kiln::SharedLayoutAttr>(kiln::getLayout(dot.getA().getType())))
    return dot.emitError("convert-kiln-to-gpu: a tensor-core A operand is #kiln.dot_operand or #kiln.shared");
  if (!isa<kiln::SharedLayoutAttr>(kiln::getLayout(dot.getB().getType())))
    return dot.emitError("convert-kiln-to-gpu: a tensor-core B operand is #kiln.shared");
  SmemTile ta = aInRegisters ? SmemTile{} : operandTile(dot.getA(), scratch);
  SmemTile tb = operandTile(dot.getB(), scratch);
  if (scratch > 0) {
    reserveSmem(scratch);
    barrier();
  }
  // ldmatrix wants swizzled rows (conflict-free) and, for B, pairs of 8-column tiles.
  bool pairsOfB = m.tilesN() % 2 == 0;
  bool ldmatrixA = !aInRegisters && ta.swizzled, ldmatrixB = tb.swizzled && pairsOfB;
  MLIRContext *ctx = b.getContext();
  auto pair = VectorType::get({2}, in);
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  Value wr = arith::DivUIOp::create(b, loc, warp, i32(m.wn));
  Value wc = arith::RemUIOp::create(b, loc, warp, i32(m.wn));
  Value groupRow = arith::DivUIOp::create(b, loc, lane, i32(4));                  // lane / 4
  Value pairCol = arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, lane, i32(4)), i32(2));
  Value warpRow = arith::MulIOp::create(b, loc, wr, i32(m.M / m.wm));
  Value warpCol = arith::MulIOp::create(b, loc, wc, i32(m.N / m.wn));
  Value rowBase = arith::AddIOp::create(b, loc, warpRow, groupRow);
  Value colBase = arith::AddIOp::create(b, loc, warpCol, groupRow);
  // NVVM takes bf16 fragments as i32 registers and f16 ones as vector<2xf16>.
  auto operand = [&](Value v) -> Value {
    if (in.isBF16())
      return v.getType().isInteger(32) ? v : Value(LLVM::BitcastOp::create(b, loc, b.getI32Type(), v));
    return isa<VectorType>(v.getType()) ? v : Value(LLVM::BitcastOp::create(b, loc, pair, v));
  };
  // A[row][k], A[row][k + 1] (k even: one 16-byte chunk, swizzled or not)
  auto loadPairA = [&](Value row, Value k) -> Value {
    return operand(LLVM::LoadOp::create(b, loc, pair, tileAddr(ta, tileIndex(ta, row, k)), 4));
  };
  auto loadPairB = [&](Value k, Value n) -> Value { // B[k][n], B[k + 1][n]
    if (tb.transposed) // consecutive in the source
      return operand(LLVM::LoadOp::create(b, loc, pair, tileAddr(tb, tileIndex(tb, n, k)), 4));
    Value k1 = arith::AddIOp::create(b, loc, k, i32(1));
    Value v = LLVM::UndefOp::create(b, loc, pair);
    v = LLVM::InsertElementOp::create(b, loc, v, LLVM::LoadOp::create(b, loc, in, tileAddr(tb, tileIndex(tb, k, n))), i32(0));
    return operand(LLVM::InsertElementOp::create(
        b, loc, v, LLVM::LoadOp::create(b, loc, in, tileAddr(tb, tileIndex(tb, k1, n))), i32(1)));
  };
  // ldmatrix: lane l supplies the address of row (l % 8) of 8x8 matrix l / 8.
  Value lane8 = arith::RemUIOp::create(b, loc, lane, i32(8));
  Value quad = arith::DivUIOp::create(b, loc, lane, i32(8));
  Value quadLo = arith::RemUIOp::create(b, loc, quad, i32(2)); // matrix index bit 0
  Value quadHi = arith::DivUIOp::create(b, loc, quad, i32(2)); // matrix index bit 1
  auto ldmatrix = [&](const SmemTile &t, Value index, int num, bool trans) {
    auto i32t = b.getI32Type();
    SmallVector<Type> regs(num, i32t);
    Type res = num == 1 ? Type(i32t) : Type(LLVM::LLVMStructType::getLiteral(ctx, regs));
    Value r = NVVM::LdMatrixOp::create(
        b, loc, res, tileAddr(t, index), b.getI32IntegerAttr(num),
        NVVM::MMALayoutAttr::get(ctx, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row),
        NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
        NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    SmallVector<Value> out;
    for (int i = 0; i < num; ++i)
      out.push_back(operand(num == 1 ? r : Value(LLVM::ExtractValueOp::create(b, loc, r, ArrayRef<int64_t>{i}))));
    return out;
  };
  // A (16x16 at rows r0.., k0..): matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15), in
  // the order of the mma A fragment.
  auto ldmatrixFragA = [&](int64_t tm, int64_t k0) {
    Value row = arith::AddIOp::create(b, loc, warpRow,
                                      arith::AddIOp::create(b, loc, lane8,
                                                            arith::MulIOp::create(b, loc, quadLo, i32(8))));
    row = arith::AddIOp::create(b, loc, row, i32(tm * 16));
    Value col = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadHi, i32(8)), i32(k0));
    return ldmatrix(ta, tileIndex(ta, row, col), 4, false);
  };
  // B (16 x 16 at k0.., n0..) transposed: matrices (k 0-7 | 8-15) x (n 0-7 | 8-15)
  // give b0, b1 of two adjacent 8-column mma tiles.
  auto ldmatrixFragB = [&](int64_t tn, int64_t k0) {
    if (tb.transposed) {
      // The source (N x K) read as is: matrices (n 0-7 | 8-15) x (k 0-7 | 8-15)
      // are b0, b1 of the two tiles, in that order.
      Value n = arith::AddIOp::create(b, loc, warpCol,
                                      arith::AddIOp::create(b, loc, lane8,
                                                            arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadHi, i32(8)), i32(tn * 8))));
      Value k = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadLo, i32(8)), i32(k0));
      return ldmatrix(tb, tileIndex(tb, n, k), 4, false);
    }
    Value k = arith::AddIOp::create(b, loc, lane8,
                                    arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadLo, i32(8)), i32(k0)));
    Value n = arith::AddIOp::create(b, loc, warpCol,
                                    arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadHi, i32(8)), i32(tn * 8)));
    return ldmatrix(tb, tileIndex(tb, k, n), 4, true);
  };
  NVVM::MMATypes ptxType = in.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    Value kLo = arith::AddIOp::create(b, loc, pairCol, i32(k0));
    Value kHi = arith::AddIOp::create(b, loc, pairCol, i32(k0 + 8));
    SmallVector<SmallVector<Value>> bFrags;
    if (ldmatrixB) {
      for (int64_t tn = 0; tn < m.tilesN(); tn += 2) {
        auto r = ldmatrixFragB(tn, k0);
        bFrags.push_back({r[0], r[1]});
        bFrags.push_back({r[2], r[3]});
      }
    } else {
      for (int64_t tn = 0; tn < m.tilesN(); ++tn) {
        Value n = arith::AddIOp::create(b, loc, colBase, i32(tn * 8));
        bFrags.push_back({loadPairB(kLo, n), loadPairB(kHi, n)});
      }
    }
    for (int64_t tm = 0; tm < m.tilesM(); ++tm) {
      Value r0 = arith::AddIOp::create(b, loc, rowBase, i32(tm * 16));
      Value r1 = arith::AddIOp::create(b, loc, rowBase, i32(tm * 16 + 8));
      SmallVector<Value> aFrag;
      if (aInRegisters) {
        // the source's 8-column tiles along K
        for (Value pair : accumulatorFragmentA(raw(dot.getA()), tm * (K / 8) + k0 / 8))
          aFrag.push_back(operand(pair));
      } else if (ldmatrixA) {
        aFrag = ldmatrixFragA(tm, k0);
      } else {
        aFrag = {loadPairA(r0, kLo), loadPairA(r1, kLo), loadPairA(r0, kHi), loadPairA(r1, kHi)};
      }
      for (int64_t tn = 0; tn < m.tilesN(); ++tn) {
        int64_t base = (tm * m.tilesN() + tn) * 4;
        SmallVector<Value> c;
        for (int r = 0; r < 4; ++r)
          c.push_back(pick(acc, base + r));
        Value d = NVVM::MmaOp::create(b, loc, resultType, aFrag, bFrags[tn], c, {16, 8, 16},
                                      std::nullopt, std::nullopt,
                                      std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
                                      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                                     NVVM::MMALayout::col});
        if (acc.size() == 1)
          acc.assign(m.perThread(), acc[0]);
        for (int r = 0; r < 4; ++r)
          acc[base + r] = LLVM::ExtractValueOp::create(b, loc, d, ArrayRef<int64_t>{r});
      }
    }
  }
  if (scratch > 0)
    barrier(); // before the scratch area is reused
  if (acc.size() == 1)
    acc.assign(m.perThread(), acc[0]);
  values[dot] = acc;
  return success();
}

LogicalResult Emitter::emitWgmmaDot(kiln::DotOp dot, const Mma &m) {
  auto at = dot.getA().getType();
  int64_t M = m.M, N = m.N, K = at.getDimSize(1);
  Type in = at.getElementType();
  // Operands in rings are read in place; others are staged in scratch,
  // panels on 1024-byte boundaries as the descriptors' swizzle wants. A in
  // #kiln.dot_operand (an earlier product's accumulator) is read from
  // registers.
  bool aInRegisters = isa<kiln::DotOperandLayoutAttr>(kiln::getLayout(at));
  int64_t scratch = 0;
  SmemTile ta = aInRegisters ? SmemTile{} : operandTile(dot.getA(), scratch, 1024);
  SmemTile tb = operandTile(dot.getB(), scratch, 1024);
  // TF32 (f32 operands): 8-deep steps over 32-column panels, both operands
  // K-major (wgmma transposes 16-bit operands only).
  bool tf32 = in.isF32();
  int64_t elemBytes = tf32 ? 4 : 2, panelCols = panelColsOf(elemBytes), kStep = tf32 ? 8 : 16;
  if ((!aInRegisters && (!ta.swizzled || ta.transposed)) || !tb.swizzled || m.wn != 1 || M != 16 * m.wm)
    return dot.emitError("convert-kiln-to-gpu: a wgmma product reads swizzled operands, A not "
                         "transposed, 64 rows per warpgroup");
  if (tf32 && (aInRegisters || !tb.transposed))
    return dot.emitError("convert-kiln-to-gpu: a TF32 wgmma product reads both operands K-major from "
                         "shared memory");
  if (scratch > 0) {
    if (scratchBase % 1024 != 0)
      return dot.emitError("convert-kiln-to-gpu: the scratch area is not 1024-byte aligned for wgmma");
    reserveSmem(scratch);
    // The staged operands were written by ordinary stores; wgmma reads them
    // through the async proxy.
    fenceForAsyncProxy();
    barrier();
  }
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto c64 = [&](int64_t v) -> Value { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); };
  // A matrix descriptor of the 128-byte swizzled operand at byte `offset` of
  // the shared-memory array: start address, leading and stride byte offsets
  // (in 16-byte units), swizzle mode 1 (128 bytes). Operand panels (64
  // 16-bit columns, 128-byte rows, 8-row groups 1024 bytes apart) start on
  // 1024-byte boundaries, so the base offset is 0.
  auto descriptor = [&](Value offset, int64_t leading, int64_t stride) -> Value {
    Value addr = LLVM::PtrToIntOp::create(b, loc, i64, smemPtr(offset));
    Value start = arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, addr, c64(0x3FFFF)), c64(4));
    int64_t fields = ((leading >> 4) & 0x3FFF) << 16 | ((stride >> 4) & 0x3FFF) << 32 | int64_t(1) << 62;
    return arith::OrIOp::create(b, loc, start, c64(fields));
  };
  constexpr int64_t kRowBytes = 128, kGroupBytes = 8 * kRowBytes;
  // Byte offset of element (row, k) of a K-major tile of `rows` rows
  // (panels of rows x 128 bytes; see swizzled), before swizzling.
  auto kMajor = [&](int64_t rows, int64_t row, int64_t k) {
    return (k / panelCols) * rows * kRowBytes + row * kRowBytes + (k % panelCols) * elemBytes;
  };
  // Warpgroup g computes rows [64 g, 64 g + 64).
  Value group = arith::DivUIOp::create(b, loc, warp, i32(4));
  Value aGroup = aInRegisters ? Value()
                              : Value(arith::AddIOp::create(b, loc, ta.base,
                                                            arith::MulIOp::create(b, loc, group, i32(64 * kRowBytes))));
  NVVM::WGMMATypes type = tf32 ? NVVM::WGMMATypes::tf32 : in.isF16() ? NVVM::WGMMATypes::f16 : NVVM::WGMMATypes::bf16;
  Type f32 = b.getF32Type();
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(N / 2, f32));
  SmallVector<Value> acc = raw(dot.getAcc());
  // A zero accumulator is not materialised: the first step ignores it
  // (scale-d = 0). Zeroed registers would also be one register copied into
  // every accumulator, which ptxas then treats as shared with the products
  // still in flight and waits for them.
  bool zeroAcc = llvm::all_of(acc, [](Value v) { return matchPattern(v, m_AnyZeroFloat()); });
  Value d = LLVM::UndefOp::create(b, loc, accType);
  for (int64_t j = 0; j < N / 2 && !zeroAcc; ++j)
    d = LLVM::InsertValueOp::create(b, loc, d, pick(acc, j), ArrayRef<int64_t>{j});
  // A from registers: the fragment at each k0 is accumulator tiles k0 / 8
  // and k0 / 8 + 1 of this warp's 16 rows, as for mma.sync (see
  // accumulatorFragmentA), all packed before the fence.
  SmallVector<SmallVector<Value>> aFrags;
  if (aInRegisters) {
    SmallVector<Value> aRegs = raw(dot.getA());
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      SmallVector<Value> &frag = aFrags.emplace_back();
      for (Value pair : accumulatorFragmentA(aRegs, k0 / 8))
        frag.push_back(LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair));
    }
  }
  // The accumulator registers are the wgmma's from here until the wait.
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t k0 = 0; k0 < K; k0 += kStep) {
    Value descB;
    int64_t kRows = tb.type.getDimSize(0);
    if (tb.transposed) // the source (N x K) is K-major: B in wgmma's own orientation
      descB = descriptor(arith::AddIOp::create(b, loc, tb.base, i32(kMajor(kRows, 0, k0))), 16, kGroupBytes);
    else // (K x N), N contiguous: MN-major, panels of 64 columns K * 128 bytes apart
      descB = descriptor(arith::AddIOp::create(b, loc, tb.base, i32(k0 * kRowBytes)), kRows * kRowBytes,
                         kGroupBytes);
    bool accumulate = k0 > 0 || !zeroAcc;
    if (aInRegisters) {
      d = wgmmaRegisterA(d, aFrags[k0 / 16], descB, N, in, /*transposeB=*/!tb.transposed, accumulate);
      continue;
    }
    Value descA = descriptor(arith::AddIOp::create(b, loc, aGroup, i32(kMajor(M, 0, k0))), 16, kGroupBytes);
    d = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accType, d, descA, descB, NVVM::MMAShapeAttr::get(ctx, 64, int(N), int(kStep)), type, type,
        NVVM::WGMMATypes::f32, accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        NVVM::MMALayout::row, tb.transposed ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  // An asynchronous product is waited for by a kiln.dot_wait.
  if (!dot.getAsync())
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
  SmallVector<Value> out;
  for (int64_t j = 0; j < N / 2; ++j)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, d, ArrayRef<int64_t>{j}));
  if (scratch > 0)
    barrier(); // every warpgroup's products are done with the scratch area
  values[dot] = out;
  return success();
}

Value Emitter::wgmmaRegisterA(Value acc, ArrayRef<Value> aFrag, Value descB, int64_t N, Type in,
                              bool transposeB, bool accumulate) {
  // nvvm.wgmma.mma_async takes A from shared memory only: the register form
  // is written out, its accumulator registers tied in and out.
  auto accType = cast<LLVM::LLVMStructType>(acc.getType());
  int64_t n = N / 2;
  // p is scale-d: whether the product adds to the accumulator's registers.
  std::string text = std::string("{\n.reg .pred p;\nsetp.ne.b32 p, ") + (accumulate ? "1" : "0") +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(N) + "k16.f32." + (in.isF16() ? "f16.f16" : "bf16.bf16") + " {";
  for (int64_t j = 0; j < n; ++j)
    text += (j ? ", $" : "$") + std::to_string(j);
  text += "}, {";
  for (int64_t j = 0; j < 4; ++j)
    text += (j ? ", $" : "$") + std::to_string(n + j);
  text += "}, $" + std::to_string(n + 4) + ", p, 1, 1, " + (transposeB ? "1" : "0") + ";\n}";
  std::string constraints;
  for (int64_t j = 0; j < n; ++j)
    constraints += (j ? ",=f" : "=f");
  constraints += ",r,r,r,r,l";
  for (int64_t j = 0; j < n; ++j)
    constraints += "," + std::to_string(j);
  SmallVector<Value> operands(aFrag.begin(), aFrag.end());
  operands.push_back(descB);
  for (int64_t j = 0; j < n; ++j)
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{j}));
  return LLVM::InlineAsmOp::create(b, loc, accType, operands, text, constraints, /*has_side_effects=*/true,
                                   /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

LogicalResult Emitter::emitDotWait(kiln::DotWaitOp op) {
  // The wait takes the accumulator registers in and gives them back, so
  // that nothing computed from them (an epilogue's conversions) is moved
  // before it, where they are still being written.
  SmallVector<Value> in = raw(op.getInput());
  int64_t n = perThreadOf(op.getType());
  SmallVector<Value> operands;
  SmallVector<Type> types;
  std::string constraints;
  for (int64_t j = 0; j < n; ++j) {
    operands.push_back(pick(in, j));
    types.push_back(operands.back().getType());
    constraints += (j ? ",=f" : "=f");
  }
  for (int64_t j = 0; j < n; ++j)
    constraints += "," + std::to_string(j);
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  Value waited =
      LLVM::InlineAsmOp::create(b, loc, structType, operands,
                                "wgmma.wait_group.sync.aligned " + std::to_string(op.getPendings()) + ";",
                                constraints, /*has_side_effects=*/true, /*is_align_stack=*/false,
                                LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
          .getResult(0);
  SmallVector<Value> out;
  for (int64_t j = 0; j < n; ++j)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, waited, ArrayRef<int64_t>{j}));
  if (op.getSync())
    barrier();
  values[op.getResult()] = out;
  return success();
}

void populateDotToGpuPatterns(const TypeConverter &converter, LoweringState &state,
                              RewritePatternSet &patterns) {
  addPattern<kiln::DotOp, &Emitter::emitDot>(patterns, converter, state);
  addPattern<kiln::DotWaitOp, &Emitter::emitDotWait>(patterns, converter, state);
}

} // namespace kiln::gpu_lowering
