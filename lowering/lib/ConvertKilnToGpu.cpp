//===- ConvertKilnToGpu.cpp - distribute kiln tiles over a CTA's threads --===//
//
// Rewrites each kiln kernel as a gpu.func whose body is scalar code run by
// every thread: a tile value becomes the list of elements this thread holds
// under the value's layout (see Passes.td). Data movement between layouts,
// general reductions and dot go through one shared-memory scratch buffer.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOGPU
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

constexpr int64_t kMaxStaticSmem = 48 * 1024;
constexpr const char *kSmemName = "kiln_smem";

/// Which elements of a value a thread holds.
struct Layout {
  int64_t numel = 1;
  int64_t perThread = 1;
  bool distributed = false; ///< thread t holds groups of `vec` consecutive flat elements
  int64_t vec = 1;          ///< elements per group (consecutive along the last dimension)
};

int64_t byteSize(Type t) {
  if (isa<kiln::PtrType>(t))
    return 8;
  return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
}

class Emitter {
public:
  Emitter(OpBuilder &b, Location loc, int threads, gpu::GPUModuleOp module)
      : b(b), loc(loc), threads(threads), module(module) {}

  LogicalResult run(func::FuncOp src, gpu::GPUFuncOp dst) {
    b.setInsertionPointToStart(&dst.getBody().front());
    Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    tid = arith::IndexCastOp::create(b, loc, b.getI32Type(), t);
    Value w = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
    lane = arith::RemUIOp::create(b, loc, tid, w);
    warp = arith::DivUIOp::create(b, loc, tid, w);
    for (auto [from, to] : llvm::zip(src.getArguments(), dst.getArguments()))
      values[from] = {to};
    if (failed(emitBlock(src.getBody().front())))
      return failure();
    gpu::ReturnOp::create(b, loc);
    if (smemBytes > kMaxStaticSmem)
      return src.emitError("kernel needs ")
             << smemBytes << " bytes of shared memory (limit " << kMaxStaticSmem
             << "); use smaller blocks";
    if (smemBytes > 0) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), smemBytes);
      LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/false, LLVM::Linkage::Internal,
                             kSmemName, Attribute(), /*alignment=*/16, /*addrSpace=*/3);
    }
    return success();
  }

private:
  OpBuilder &b;
  Location loc;
  int threads;
  gpu::GPUModuleOp module;
  Value tid, lane, warp;
  DenseMap<Value, SmallVector<Value>> values;
  int64_t smemBytes = 0;

  //===--------------------------------------------------------------------===//
  // Layouts and small helpers
  //===--------------------------------------------------------------------===//

  Layout layoutOf(Type t) const {
    auto tile = dyn_cast<RankedTensorType>(t);
    if (!tile)
      return {};
    Layout l;
    l.numel = tile.getNumElements();
    l.distributed = l.numel % threads == 0;
    l.perThread = l.distributed ? l.numel / threads : l.numel;
    // Groups of up to 8 consecutive elements of one row per thread, so that
    // global and shared accesses can be 128-bit. A function of the shape only:
    // tiles of one shape share a layout whatever their dtype.
    if (l.distributed) {
      int64_t last = tile.getShape().back();
      for (int64_t v = 8; v > 1; v /= 2)
        if (l.perThread % v == 0 && last % v == 0) {
          l.vec = v;
          break;
        }
    }
    return l;
  }

  Value i32(int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v)); }

  /// Flat (row-major) index of this thread's j-th element.
  Value flatIndex(const Layout &l, int64_t j) {
    if (!l.distributed)
      return i32(j);
    // group g = j / vec holds flat elements (g * T + tid) * vec + [0, vec)
    int64_t g = j / l.vec, v = j % l.vec;
    Value t = l.vec == 1 ? tid : Value(arith::MulIOp::create(b, loc, tid, i32(l.vec)));
    return arith::AddIOp::create(b, loc, t, i32(g * threads * l.vec + v));
  }

  //===--------------------------------------------------------------------===//
  // Strides along the last dimension (0: same value, 1: consecutive), used to
  // find vectorisable global accesses. Unknown values have no entry.
  //===--------------------------------------------------------------------===//

  DenseMap<Value, int64_t> strides;
  std::optional<int64_t> strideOf(Value v) {
    auto it = values.find(v);
    if (it != values.end() && it->second.size() == 1)
      return 0;
    auto s = strides.find(v);
    if (s == strides.end())
      return std::nullopt;
    return s->second;
  }
  void setStride(Value v, std::optional<int64_t> s) {
    if (s && (*s == 0 || *s == 1))
      strides[v] = *s;
  }
  /// Stride of an element-wise integer op's result from its operands'.
  std::optional<int64_t> strideThrough(Operation *op) {
    auto sa = op->getNumOperands() > 0 ? strideOf(op->getOperand(0)) : std::nullopt;
    auto sb = op->getNumOperands() > 1 ? strideOf(op->getOperand(1)) : std::nullopt;
    if (llvm::all_of(op->getOperands(), [&](Value v) { return strideOf(v) == 0; }))
      return 0;
    if (!sa || !sb)
      return std::nullopt;
    if (isa<arith::AddIOp>(op))
      return *sa + *sb;
    if (isa<arith::SubIOp>(op))
      return *sa - *sb;
    if (isa<arith::MulIOp>(op)) {
      // x * 1 keeps x's stride.
      for (int i = 0; i < 2; ++i) {
        APInt c;
        if (strideOf(op->getOperand(1 - i)) == 0 &&
            matchPattern(op->getOperand(1 - i), m_ConstantInt(&c)) && c.isOne())
          return i == 0 ? sa : sb;
      }
    }
    if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::IndexCastOp>(op))
      return sa;
    return std::nullopt;
  }

  /// The elements this thread holds of `v` in the value's own layout.
  SmallVector<Value> raw(Value v) {
    auto it = values.find(v);
    assert(it != values.end() && "value emitted before use");
    return it->second;
  }
  /// The elements of `v` in the default (distributed or replicated) layout,
  /// converting a tensor-core accumulator once, through shared memory.
  SmallVector<Value> get(Value v) {
    auto m = mma.find(v);
    if (m == mma.end())
      return raw(v);
    auto cached = defaults.find(v);
    if (cached != defaults.end())
      return cached->second;
    SmallVector<Value> in = raw(v);
    SmallVector<Value> out;
    if (in.size() == 1) {
      out = in;
    } else {
      auto tile = cast<RankedTensorType>(v.getType());
      Type stored = storageType(tile.getElementType());
      Mma info = m->second;
      for (int64_t j = 0; j < int64_t(in.size()); ++j)
        storeSmem(0, mmaFlat(info, j), in[j]);
      reserveSmem(tile.getNumElements() * byteSize(stored));
      barrier();
      Layout l = layoutOf(tile);
      for (int64_t j = 0; j < l.perThread; ++j)
        out.push_back(loadSmem(0, flatIndex(l, j), stored));
      barrier();
    }
    defaults[v] = out;
    return out;
  }
  Value elem(Value v, int64_t j) {
    auto vs = get(v);
    return vs.size() == 1 ? vs[0] : vs[j];
  }
  static Value pick(ArrayRef<Value> vs, int64_t j) { return vs.size() == 1 ? vs[0] : vs[j]; }

  //===--------------------------------------------------------------------===//
  // Tensor-core accumulator layout (mma.sync m16n8k16)
  //===--------------------------------------------------------------------===//

  /// An (M, N) tile split over wm x wn warps; each warp owns an (M/wm, N/wn)
  /// region of 16x8 mma tiles, 4 f32 per thread per tile.
  struct Mma {
    int64_t M, N, wm, wn;
    int64_t tilesM() const { return M / wm / 16; }
    int64_t tilesN() const { return N / wn / 8; }
    int64_t perThread() const { return tilesM() * tilesN() * 4; }
    bool operator==(const Mma &o) const { return M == o.M && N == o.N && wm == o.wm && wn == o.wn; }
  };
  DenseMap<Value, Mma> mma;
  DenseMap<Value, SmallVector<Value>> defaults;

  /// The tensor-core layout `dot` uses for its result, if it can use one.
  std::optional<Mma> mmaFor(kiln::DotOp dot) const {
    auto a = dot.getA().getType();
    Type in = a.getElementType();
    if (!in.isF16() && !in.isBF16())
      return std::nullopt;
    int64_t M = a.getDimSize(0), K = a.getDimSize(1), N = dot.getB().getType().getDimSize(1);
    if (K % 16 != 0)
      return std::nullopt;
    int warps = threads / 32;
    std::optional<Mma> best;
    for (int wm = 1; wm <= warps; wm *= 2) {
      int wn = warps / wm;
      if (M % (16 * wm) != 0 || N % (8 * wn) != 0)
        continue;
      Mma m{M, N, wm, wn};
      // Prefer square warp regions: fewer fragment loads per mma.
      auto cost = [](const Mma &x) { return std::abs(x.M / x.wm - x.N / x.wn); };
      if (!best || cost(m) < cost(*best))
        best = m;
    }
    return best;
  }

  /// Flat (row-major) index of this thread's j-th accumulator element.
  Value mmaFlat(const Mma &m, int64_t j) {
    int64_t tile = j / 4, r = j % 4;
    int64_t tm = tile / m.tilesN(), tn = tile % m.tilesN();
    Value wr = arith::DivUIOp::create(b, loc, warp, i32(m.wn));
    Value wc = arith::RemUIOp::create(b, loc, warp, i32(m.wn));
    Value row = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, wr, i32(m.M / m.wm)),
        arith::AddIOp::create(b, loc, arith::DivUIOp::create(b, loc, lane, i32(4)),
                              i32(tm * 16 + (r >= 2 ? 8 : 0))));
    Value col = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, wc, i32(m.N / m.wn)),
        arith::AddIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, lane, i32(4)), i32(2)),
            i32(tn * 8 + (r & 1))));
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, row, i32(m.N)), col);
  }

  /// The elements of `v` in accumulator layout `m` (through shared memory
  /// unless `v` is uniform or already there).
  SmallVector<Value> toMma(Value v, const Mma &m) {
    auto it = mma.find(v);
    if (it != mma.end() && it->second == m)
      return raw(v);
    SmallVector<Value> in = get(v);
    if (in.size() == 1)
      return in;
    auto tile = cast<RankedTensorType>(v.getType());
    Type stored = storageType(tile.getElementType());
    if (auto bc = v.getDefiningOp<kiln::BroadcastOp>()) {
      // Gather from the (smaller) source of a broadcast, e.g. a bias row.
      auto src = bc.getSrc().getType();
      if (get(bc.getSrc()).size() == 1)
        return get(bc.getSrc());
      reserveSmem(spill(bc.getSrc(), 0));
      barrier();
      SmallVector<Value> out;
      for (int64_t j = 0; j < m.perThread(); ++j) {
        SmallVector<Value> idx = unravel(mmaFlat(m, j), tile.getShape());
        for (int64_t d = 0; d < tile.getRank(); ++d)
          if (src.getDimSize(d) == 1)
            idx[d] = i32(0);
        out.push_back(loadSmem(0, ravel(idx, src.getShape()), stored));
      }
      barrier();
      return out;
    }
    reserveSmem(spill(v, 0));
    barrier();
    SmallVector<Value> out;
    for (int64_t j = 0; j < m.perThread(); ++j)
      out.push_back(loadSmem(0, mmaFlat(m, j), stored));
    barrier();
    return out;
  }

  /// The accumulator layout shared by `operands` when one of them has it.
  std::optional<Mma> commonMma(ValueRange operands, Type result) {
    for (Value v : operands) {
      auto it = mma.find(v);
      if (it != mma.end() && v.getType() == kiln::getSameShape(result, kiln::getElementTypeOrSelf(v.getType())))
        return it->second;
    }
    return std::nullopt;
  }

  Type storageType(Type elem) {
    if (isa<kiln::PtrType>(elem))
      return b.getI64Type();
    return elem;
  }

  /// Multi-index of flat index `flat` in `shape`, as i32 values.
  SmallVector<Value> unravel(Value flat, ArrayRef<int64_t> shape) {
    SmallVector<Value> idx(shape.size());
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      idx[d] = arith::RemSIOp::create(b, loc, flat, i32(shape[d]));
      flat = arith::DivSIOp::create(b, loc, flat, i32(shape[d]));
    }
    return idx;
  }
  Value ravel(ArrayRef<Value> idx, ArrayRef<int64_t> shape) {
    Value flat = i32(0);
    for (size_t d = 0; d < shape.size(); ++d)
      flat = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, flat, i32(shape[d])),
                                   idx[d]);
    return flat;
  }

  //===--------------------------------------------------------------------===//
  // Shared memory
  //===--------------------------------------------------------------------===//

  Value smemAddr(int64_t baseBytes, Value index, Type elem) {
    auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Value base = LLVM::AddressOfOp::create(b, loc, ptrType, kSmemName);
    Value off = arith::AddIOp::create(
        b, loc, i32(baseBytes), arith::MulIOp::create(b, loc, index, i32(byteSize(elem))));
    return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base, ValueRange{off});
  }
  void reserveSmem(int64_t bytes) { smemBytes = std::max(smemBytes, bytes); }
  void barrier() { gpu::BarrierOp::create(b, loc); }

  void storeSmem(int64_t base, Value index, Value v) {
    Value x = v.getType().isInteger(1) ? Value(arith::ExtUIOp::create(b, loc, b.getI8Type(), v)) : v;
    LLVM::StoreOp::create(b, loc, x, smemAddr(base, index, x.getType()));
  }
  Value loadSmem(int64_t base, Value index, Type elem) {
    Type stored = elem.isInteger(1) ? b.getI8Type() : elem;
    Value v = LLVM::LoadOp::create(b, loc, stored, smemAddr(base, index, stored));
    if (elem.isInteger(1))
      v = arith::TruncIOp::create(b, loc, elem, v);
    return v;
  }
  /// Writes every element this thread holds of `v` at its flat index; returns bytes used.
  /// Index of element (row, col) of a (rows, cols) 16-bit matrix in shared
  /// memory with its 16-byte chunks XOR-swizzled by the row, so that the eight
  /// rows an ldmatrix reads fall in different banks.
  Value swizzled(Value row, Value col, int64_t cols) {
    int64_t chunks = cols / 8;
    int64_t mask = std::min<int64_t>(chunks, 8) - 1;
    Value chunk = arith::DivUIOp::create(b, loc, col, i32(8));
    Value within = arith::RemUIOp::create(b, loc, col, i32(8));
    Value perm = arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, i32(mask)));
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, row, i32(cols)),
        arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, perm, i32(8)), within));
  }
  static bool swizzlable(int64_t cols) {
    return cols % 8 == 0 && llvm::isPowerOf2_64(uint64_t(cols / 8));
  }

  /// Writes every element this thread holds of `v` at its flat index (for
  /// `swizzle`, at its swizzled index: 2-D 16-bit tiles); returns bytes used.
  int64_t spill(Value v, int64_t base, bool swizzle = false) {
    auto tile = cast<RankedTensorType>(v.getType());
    Type stored = storageType(tile.getElementType());
    Layout l = layoutOf(tile);
    SmallVector<Value> vs = get(v);
    int64_t width = vectorWidth(l, stored);
    int64_t cols = tile.getShape().back();
    auto index = [&](int64_t j) -> Value {
      Value flat = flatIndex(l, j);
      if (!swizzle)
        return flat;
      return swizzled(arith::DivUIOp::create(b, loc, flat, i32(cols)),
                      arith::RemUIOp::create(b, loc, flat, i32(cols)), cols);
    };
    for (int64_t j = 0; j < l.perThread; j += width) {
      if (width == 1) {
        storeSmem(base, index(j), pick(vs, j));
        continue;
      }
      SmallVector<Value> part;
      for (int64_t k = 0; k < width; ++k)
        part.push_back(pick(vs, j + k));
      Value vec = pack(part);
      LLVM::StoreOp::create(b, loc, vec, smemAddr(base, index(j), stored),
                            width * byteSize(stored));
    }
    return tile.getNumElements() * std::max<int64_t>(byteSize(stored), 1);
  }

  /// Elements per vector access for layout `l` and element type `t` (at most 16 bytes).
  int64_t vectorWidth(const Layout &l, Type t) {
    if (!l.distributed || l.vec == 1 || t.isInteger(1))
      return 1;
    return std::min<int64_t>(l.vec, 16 / byteSize(t));
  }
  Value pack(ArrayRef<Value> elems) {
    auto type = VectorType::get({int64_t(elems.size())}, elems[0].getType());
    Value v = LLVM::UndefOp::create(b, loc, type);
    for (auto [i, e] : llvm::enumerate(elems))
      v = LLVM::InsertElementOp::create(b, loc, v, e, i32(i));
    return v;
  }
  SmallVector<Value> unpack(Value vec, int64_t n) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < n; ++i)
      out.push_back(LLVM::ExtractElementOp::create(b, loc, vec, i32(i)));
    return out;
  }

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  LogicalResult emitBlock(Block &block) {
    for (Operation &op : block)
      if (failed(emitOp(&op)))
        return failure();
    return success();
  }

  LogicalResult emitOp(Operation *op) {
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
      return success();
    }
    if (isa<kiln::ExpandDimsOp, kiln::ReshapeOp>(op)) {
      // Same element count and row-major order; the layout may group
      // elements differently (the last dimension can change), so regroup
      // through shared memory when it does.
      Value src = op->getOperand(0), dst = op->getResult(0);
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
        setStride(dst, strideOf(src));
      return success();
    }
    if (auto bc = dyn_cast<kiln::BroadcastOp>(op))
      return emitBroadcast(bc);
    if (auto ap = dyn_cast<kiln::AddPtrOp>(op))
      return emitAddPtr(ap);
    if (auto ld = dyn_cast<kiln::LoadOp>(op))
      return emitLoad(ld);
    if (auto st = dyn_cast<kiln::StoreOp>(op))
      return emitStore(st);
    if (auto sel = dyn_cast<kiln::SelectOp>(op)) {
      std::optional<Mma> m = commonMma(sel->getOperands(), sel.getType());
      auto view = [&](Value v) { return m ? toMma(v, *m) : get(v); };
      auto c = view(sel.getCondition()), t = view(sel.getTrueValue()), f = view(sel.getFalseValue());
      int64_t n = std::max({c.size(), t.size(), f.size()});
      SmallVector<Value> out;
      for (int64_t j = 0; j < n; ++j)
        out.push_back(arith::SelectOp::create(b, loc, pick(c, j), pick(t, j), pick(f, j)));
      values[sel] = out;
      if (m && n > 1)
        mma[sel] = *m;
      return success();
    }
    if (auto cast = dyn_cast<kiln::CastOp>(op)) {
      std::optional<Mma> m = commonMma(cast->getOperands(), cast.getType());
      auto in = m ? toMma(cast.getSrc(), *m) : get(cast.getSrc());
      Type to = kiln::getElementTypeOrSelf(cast.getType());
      SmallVector<Value> out;
      for (Value x : in)
        out.push_back(kiln::emitCast(b, loc, x, to));
      values[cast] = out;
      if (m && out.size() > 1)
        mma[cast] = *m;
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

  LogicalResult emitConstant(arith::ConstantOp c) {
    if (auto splat = dyn_cast<SplatElementsAttr>(c.getValue())) {
      values[c] = {arith::ConstantOp::create(b, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()))};
      return success();
    }
    if (isa<RankedTensorType>(c.getType()))
      return c.emitError("convert-kiln-to-gpu: only splat tile constants are supported");
    values[c] = {b.clone(*c)->getResult(0)};
    return success();
  }

  LogicalResult emitElementwise(Operation *op) {
    if (op->getNumResults() != 1)
      return op->emitError("convert-kiln-to-gpu: expected one result");
    Value result = op->getResult(0);
    Type elemType = kiln::getElementTypeOrSelf(result.getType());
    // Operands in one layout: the accumulator layout if any operand has it.
    std::optional<Mma> m = commonMma(op->getOperands(), result.getType());
    SmallVector<SmallVector<Value>> operands;
    for (Value v : op->getOperands())
      operands.push_back(m ? toMma(v, *m) : get(v));
    int64_t n = m ? m->perThread() : layoutOf(result.getType()).perThread;
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
    if (m && n > 1)
      mma[result] = *m;
    else
      setStride(result, strideThrough(op));
    return success();
  }

  LogicalResult emitFor(scf::ForOp forOp) {
    SmallVector<Value> inits;
    SmallVector<size_t> counts;
    // Loop-carried tiles carry every element of their layout, even when the
    // initial value is uniform (a splat): iterations make them differ.
    // An accumulator fed back from a tensor-core dot stays in its layout.
    auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
    SmallVector<std::optional<Mma>> argMma;
    for (auto [i, init] : llvm::enumerate(forOp.getInitArgs())) {
      std::optional<Mma> m;
      if (auto dot = yield.getOperand(i).getDefiningOp<kiln::DotOp>())
        if (dot.getAcc() == forOp.getRegionIterArgs()[i])
          m = mmaFor(dot);
      argMma.push_back(m);
      int64_t count = m ? m->perThread() : layoutOf(init.getType()).perThread;
      counts.push_back(count);
      SmallVector<Value> vs = m ? toMma(init, *m) : get(init);
      for (int64_t j = 0; j < count; ++j)
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
      auto slice = loop.getRegionIterArgs().slice(pos, counts[i]);
      values[arg] = SmallVector<Value>(slice.begin(), slice.end());
      if (argMma[i])
        mma[arg] = *argMma[i];
      pos += counts[i];
    }
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(body);
      if (failed(emitBlock(*forOp.getBody())))
        return failure();
      SmallVector<Value> yields;
      for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
        SmallVector<Value> vs = argMma[i] ? toMma(v, *argMma[i]) : get(v);
        for (size_t j = 0; j < counts[i]; ++j)
          yields.push_back(pick(vs, j));
      }
      scf::YieldOp::create(b, loc, yields);
    }
    pos = 0;
    for (auto [i, res] : llvm::enumerate(forOp.getResults())) {
      auto slice = loop.getResults().slice(pos, counts[i]);
      values[res] = SmallVector<Value>(slice.begin(), slice.end());
      if (argMma[i])
        mma[res] = *argMma[i];
      pos += counts[i];
    }
    return success();
  }

  LogicalResult emitBroadcast(kiln::BroadcastOp bc) {
    auto src = bc.getSrc().getType();
    auto dst = bc.getType();
    if (src.getShape().back() == 1 && dst.getShape().back() != 1)
      strides[bc] = 0;
    else
      setStride(bc, strideOf(bc.getSrc()));
    Layout ls = layoutOf(src), ld = layoutOf(dst);
    SmallVector<Value> in = get(bc.getSrc());
    if (in.size() == 1) { // uniform (e.g. a splat): nothing moves
      values[bc] = {in[0]};
      return success();
    }
    auto srcFlat = [&](ArrayRef<int64_t> dstIdx) {
      int64_t f = 0;
      for (int64_t d = 0; d < dst.getRank(); ++d)
        f = f * src.getDimSize(d) + (src.getDimSize(d) == 1 ? 0 : dstIdx[d]);
      return f;
    };
    auto &out = values[bc];
    if (!ls.distributed && !ld.distributed) { // both replicated: a static gather
      for (int64_t j = 0; j < ld.perThread; ++j) {
        SmallVector<int64_t> idx(dst.getRank());
        int64_t f = j;
        for (int64_t d = dst.getRank() - 1; d >= 0; --d) {
          idx[d] = f % dst.getDimSize(d);
          f /= dst.getDimSize(d);
        }
        out.push_back(in[srcFlat(idx)]);
      }
      return success();
    }
    Type elem = storageType(src.getElementType());
    reserveSmem(spill(bc.getSrc(), 0));
    barrier();
    for (int64_t j = 0; j < ld.perThread; ++j) {
      SmallVector<Value> idx = unravel(flatIndex(ld, j), dst.getShape());
      for (int64_t d = 0; d < dst.getRank(); ++d)
        if (src.getDimSize(d) == 1)
          idx[d] = i32(0);
      out.push_back(loadSmem(0, ravel(idx, src.getShape()), elem));
    }
    barrier();
    return success();
  }

  LogicalResult emitAddPtr(kiln::AddPtrOp ap) {
    if (auto sp = strideOf(ap.getPtr()), so = strideOf(ap.getOffset()); sp && so && *sp == 0)
      setStride(ap, so);
    Type pointee = cast<kiln::PtrType>(kiln::getElementTypeOrSelf(ap.getType())).getPointeeType();
    Layout l = layoutOf(ap.getType());
    bool uniform = get(ap.getPtr()).size() == 1 && get(ap.getOffset()).size() == 1;
    Value size = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(byteSize(pointee)));
    auto &out = values[ap];
    for (int64_t j = 0; j < (uniform ? 1 : l.perThread); ++j) {
      Value off = elem(ap.getOffset(), j);
      if (off.getType().getIntOrFloatBitWidth() < 64)
        off = arith::ExtSIOp::create(b, loc, b.getI64Type(), off);
      Value bytes = arith::MulIOp::create(b, loc, off, size);
      out.push_back(arith::AddIOp::create(b, loc, elem(ap.getPtr(), j), bytes));
    }
    return success();
  }

  Value globalPtr(Value addr) {
    return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1), addr);
  }

  /// A group of `width` loads: one vector load when the pointers are
  /// consecutive (known statically), the first is aligned and every mask bit is
  /// set (checked at run time), element loads otherwise.
  SmallVector<Value> loadGroup(Type elemType, ArrayRef<Value> addrs, ArrayRef<Value> masks,
                               ArrayRef<Value> fills) {
    int64_t width = addrs.size();
    auto vecType = VectorType::get({width}, elemType);
    int64_t bytes = width * byteSize(elemType);
    Value aligned = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::AndIOp::create(b, loc, addrs[0],
                              arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes - 1))),
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
    Value fast = aligned;
    for (Value m : masks)
      fast = arith::AndIOp::create(b, loc, fast, m);
    SmallVector<Type> types(width, elemType);
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
          SmallVector<Value> parts;
          for (int64_t i = 0; i < width; ++i)
            parts.push_back(loadOne(elemType, addrs[i], masks.empty() ? Value() : masks[i],
                                    fills.empty() ? Value() : fills[i]));
          scf::YieldOp::create(b, ll, parts);
        });
    return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
  }

  Value loadOne(Type elemType, Value addr, Value mask, Value fill) {
    auto emitLoad = [&](OpBuilder &bb, Location ll) -> Value {
      Value p = LLVM::IntToPtrOp::create(bb, ll, LLVM::LLVMPointerType::get(bb.getContext(), 1), addr);
      return LLVM::LoadOp::create(bb, ll, elemType, p, byteSize(elemType));
    };
    if (!mask)
      return emitLoad(b, loc);
    if (!fill)
      fill = arith::ConstantOp::create(b, loc, b.getZeroAttr(elemType));
    auto ifOp = scf::IfOp::create(
        b, loc, mask,
        [&](OpBuilder &bb, Location ll) { scf::YieldOp::create(bb, ll, emitLoad(bb, ll)); },
        [&](OpBuilder &bb, Location ll) { scf::YieldOp::create(bb, ll, fill); });
    return ifOp.getResult(0);
  }

  LogicalResult emitLoad(kiln::LoadOp ld) {
    Type elemType = kiln::getElementTypeOrSelf(ld.getType());
    if (elemType.isInteger(1))
      return ld.emitError("convert-kiln-to-gpu: loads of i1 are not supported");
    Layout l = layoutOf(ld.getType());
    int64_t width = vectorWidth(l, elemType);
    if (width > 1 && strideOf(ld.getPtr()) == 1) {
      SmallVector<Value> ptrs = get(ld.getPtr());
      SmallVector<Value> masks = ld.getMask() ? get(ld.getMask()) : SmallVector<Value>{};
      SmallVector<Value> fills = ld.getOther() ? get(ld.getOther()) : SmallVector<Value>{};
      SmallVector<Value> out;
      for (int64_t j = 0; j < l.perThread; j += width) {
        SmallVector<Value> a, m, f;
        for (int64_t k = 0; k < width; ++k) {
          a.push_back(pick(ptrs, j + k));
          if (!masks.empty())
            m.push_back(pick(masks, j + k));
          if (!fills.empty())
            f.push_back(pick(fills, j + k));
        }
        auto part = loadGroup(elemType, a, m, f);
        out.append(part.begin(), part.end());
      }
      values[ld] = out;
      return success();
    }
    auto &out = values[ld];
    for (int64_t j = 0; j < l.perThread; ++j) {
      Value addr = elem(ld.getPtr(), j);
      auto emitLoad = [&](OpBuilder &bb, Location ll) -> Value {
        Value p = LLVM::IntToPtrOp::create(bb, ll, LLVM::LLVMPointerType::get(bb.getContext(), 1), addr);
        return LLVM::LoadOp::create(bb, ll, elemType, p, byteSize(elemType));
      };
      if (!ld.getMask()) {
        out.push_back(emitLoad(b, loc));
        continue;
      }
      Value fill = ld.getOther() ? elem(ld.getOther(), j)
                                 : Value(arith::ConstantOp::create(b, loc, b.getZeroAttr(elemType)));
      auto ifOp = scf::IfOp::create(
          b, loc, elem(ld.getMask(), j),
          [&](OpBuilder &bb, Location ll) { scf::YieldOp::create(bb, ll, emitLoad(bb, ll)); },
          [&](OpBuilder &bb, Location ll) { scf::YieldOp::create(bb, ll, fill); });
      out.push_back(ifOp.getResult(0));
    }
    return success();
  }

  LogicalResult emitStore(kiln::StoreOp st) {
    Layout l = layoutOf(st.getValue().getType());
    Type elemType = kiln::getElementTypeOrSelf(st.getValue().getType());
    int64_t width = vectorWidth(l, elemType);
    if (width > 1 && strideOf(st.getPtr()) == 1) {
      SmallVector<Value> ptrs = get(st.getPtr()), vals = get(st.getValue());
      SmallVector<Value> masks = st.getMask() ? get(st.getMask()) : SmallVector<Value>{};
      int64_t bytes = width * byteSize(elemType);
      for (int64_t j = 0; j < l.perThread; j += width) {
        Value fast = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::eq,
            arith::AndIOp::create(b, loc, pick(ptrs, j),
                                  arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes - 1))),
            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
        SmallVector<Value> part;
        for (int64_t k = 0; k < width; ++k) {
          part.push_back(pick(vals, j + k));
          if (!masks.empty())
            fast = arith::AndIOp::create(b, loc, fast, pick(masks, j + k));
        }
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
    for (int64_t j = 0; j < l.perThread; ++j) {
      Value addr = elem(st.getPtr(), j), v = elem(st.getValue(), j);
      auto emitStore = [&](OpBuilder &bb, Location ll) {
        Value p = LLVM::IntToPtrOp::create(bb, ll, LLVM::LLVMPointerType::get(bb.getContext(), 1), addr);
        LLVM::StoreOp::create(bb, ll, v, p, byteSize(v.getType()));
      };
      if (!st.getMask()) {
        emitStore(b, loc);
        continue;
      }
      auto ifOp = scf::IfOp::create(b, loc, elem(st.getMask(), j), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      emitStore(b, loc);
    }
    return success();
  }

  void storeOne(Value addr, Value v, Value mask) {
    auto emitStore = [&](OpBuilder &bb, Location ll) {
      Value p = LLVM::IntToPtrOp::create(bb, ll, LLVM::LLVMPointerType::get(bb.getContext(), 1), addr);
      LLVM::StoreOp::create(bb, ll, v, p, byteSize(v.getType()));
    };
    if (!mask)
      return emitStore(b, loc);
    auto ifOp = scf::IfOp::create(b, loc, mask, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    emitStore(b, loc);
  }

  Value combine(kiln::ReduceKind kind, Value x, Value y) { return kiln::emitCombine(b, loc, kind, x, y); }

  LogicalResult emitReduce(kiln::ReduceOp red) {
    auto src = red.getSrc().getType();
    Type elemType = src.getElementType();
    Layout ls = layoutOf(src);
    SmallVector<Value> in = get(red.getSrc());
    int64_t axis = red.getAxis();
    bool shuffleable = elemType.isF32() || elemType.isInteger(32);
    if (src.getRank() == 1 && ls.distributed && in.size() > 1 && shuffleable) {
      // Per thread, then butterfly shuffles within the warp, then across warps.
      Value acc = in[0];
      for (size_t j = 1; j < in.size(); ++j)
        acc = combine(red.getKind(), acc, in[j]);
      for (int off = 16; off >= 1; off /= 2) {
        auto shfl = gpu::ShuffleOp::create(b, loc, acc, i32(off), i32(32), gpu::ShuffleMode::XOR);
        acc = combine(red.getKind(), acc, shfl.getShuffleResult());
      }
      int warps = threads / 32;
      if (warps > 1) {
        reserveSmem(warps * byteSize(elemType));
        Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, i32(0));
        auto ifOp = scf::IfOp::create(b, loc, isLane0, false);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          storeSmem(0, warp, acc);
        }
        barrier();
        acc = loadSmem(0, i32(0), elemType);
        for (int w = 1; w < warps; ++w)
          acc = combine(red.getKind(), acc, loadSmem(0, i32(w), elemType));
        barrier();
      }
      values[red] = {acc};
      return success();
    }
    // General path: through shared memory, each result element folds its row.
    reserveSmem(spill(red.getSrc(), 0));
    barrier();
    SmallVector<int64_t> dstShape(src.getShape());
    dstShape.erase(dstShape.begin() + axis);
    Layout ld = layoutOf(red.getType());
    auto &out = values[red];
    for (int64_t j = 0; j < ld.perThread; ++j) {
      SmallVector<Value> idx = dstShape.empty() ? SmallVector<Value>{}
                                                : unravel(flatIndex(ld, j), dstShape);
      idx.insert(idx.begin() + axis, i32(0));
      Value acc = loadSmem(0, ravel(idx, src.getShape()), elemType);
      for (int64_t k = 1; k < src.getDimSize(axis); ++k) {
        idx[axis] = i32(k);
        acc = combine(red.getKind(), acc, loadSmem(0, ravel(idx, src.getShape()), elemType));
      }
      out.push_back(acc);
    }
    barrier();
    return success();
  }

  LogicalResult emitArgMax(kiln::ArgMaxOp am) {
    auto src = am.getSrc().getType();
    Type elemType = src.getElementType();
    int64_t axis = am.getAxis();
    reserveSmem(spill(am.getSrc(), 0));
    barrier();
    SmallVector<int64_t> dstShape(src.getShape());
    dstShape.erase(dstShape.begin() + axis);
    Layout ld = layoutOf(am.getType());
    bool fp = isa<FloatType>(elemType);
    auto &out = values[am];
    for (int64_t j = 0; j < ld.perThread; ++j) {
      SmallVector<Value> idx = dstShape.empty() ? SmallVector<Value>{}
                                                : unravel(flatIndex(ld, j), dstShape);
      idx.insert(idx.begin() + axis, i32(0));
      Value best = loadSmem(0, ravel(idx, src.getShape()), elemType);
      Value bestIdx = i32(0);
      for (int64_t k = 1; k < src.getDimSize(axis); ++k) {
        idx[axis] = i32(k);
        Value x = loadSmem(0, ravel(idx, src.getShape()), elemType);
        Value gt = fp ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, best))
                      : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, x, best));
        best = arith::SelectOp::create(b, loc, gt, x, best);
        bestIdx = arith::SelectOp::create(b, loc, gt, i32(k), bestIdx);
      }
      out.push_back(bestIdx);
    }
    barrier();
    return success();
  }

  LogicalResult emitDot(kiln::DotOp dot) {
    if (std::optional<Mma> m = mmaFor(dot))
      return emitMmaDot(dot, *m);
    auto at = dot.getA().getType(), bt = dot.getB().getType();
    int64_t M = at.getDimSize(0), K = at.getDimSize(1), N = bt.getDimSize(1);
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
      auto loop = scf::ForOp::create(b, loc, i32(0), i32(K), i32(1), ValueRange{elem(dot.getAcc(), j)});
      {
        OpBuilder::InsertionGuard guard(b);
        Block *body = loop.getBody();
        if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
          body->back().erase();
        b.setInsertionPointToEnd(body);
        Value k = loop.getInductionVar();
        Value av = loadSmem(0, arith::AddIOp::create(b, loc, aRow, k), in);
        Value bv = loadSmem(bBase, arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, k, i32(N)), n), in);
        Value acc = math::FmaOp::create(b, loc, widen(av), widen(bv), loop.getRegionIterArgs()[0]);
        scf::YieldOp::create(b, loc, acc);
      }
      out.push_back(loop.getResult(0));
    }
    barrier();
    (void)M;
    return success();
  }

  /// dot on tensor cores: A and B are staged in shared memory (row-major),
  /// each warp loads its A (16x16) and B (16x8) fragments and issues
  /// mma.sync.m16n8k16 with f32 accumulation into the accumulator layout.
  LogicalResult emitMmaDot(kiln::DotOp dot, const Mma &m) {
    auto at = dot.getA().getType(), bt = dot.getB().getType();
    int64_t K = at.getDimSize(1), N = bt.getDimSize(1);
    Type in = at.getElementType();
    SmallVector<Value> acc = toMma(dot.getAcc(), m);
    // ldmatrix needs swizzlable rows (a power-of-two number of 16-byte chunks)
    // and whole 8x8 matrices per lane group.
    int64_t layoutVecA = layoutOf(at).vec, layoutVecB = layoutOf(bt).vec;
    bool useLdmatrix = swizzlable(K) && swizzlable(N) && layoutVecA >= 1 && layoutVecB >= 1;
    int64_t aBytes = spill(dot.getA(), 0, useLdmatrix);
    int64_t bBase = (aBytes + 15) / 16 * 16;
    reserveSmem(bBase + spill(dot.getB(), bBase, useLdmatrix));
    barrier();
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
    auto loadPairA = [&](Value row, Value k) -> Value { // A[row][k], A[row][k + 1]
      Value idx = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, row, i32(K)), k);
      return operand(LLVM::LoadOp::create(b, loc, pair, smemAddr(0, idx, in), 4));
    };
    auto loadPairB = [&](Value k, Value n) -> Value { // B[k][n], B[k + 1][n]
      Value idx0 = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, k, i32(N)), n);
      Value idx1 = arith::AddIOp::create(b, loc, idx0, i32(N));
      Value v = LLVM::UndefOp::create(b, loc, pair);
      v = LLVM::InsertElementOp::create(b, loc, v, loadSmem(bBase, idx0, in), i32(0));
      return operand(LLVM::InsertElementOp::create(b, loc, v, loadSmem(bBase, idx1, in), i32(1)));
    };
    // ldmatrix: lane l supplies the address of row (l % 8) of 8x8 matrix l / 8.
    Value lane8 = arith::RemUIOp::create(b, loc, lane, i32(8));
    Value quad = arith::DivUIOp::create(b, loc, lane, i32(8));
    Value quadLo = arith::RemUIOp::create(b, loc, quad, i32(2)); // matrix index bit 0
    Value quadHi = arith::DivUIOp::create(b, loc, quad, i32(2)); // matrix index bit 1
    auto ldmatrix = [&](int64_t base, Value index, int num, bool trans) {
      auto i32t = b.getI32Type();
      SmallVector<Type> regs(num, i32t);
      Type res = num == 1 ? Type(i32t) : Type(LLVM::LLVMStructType::getLiteral(ctx, regs));
      Value r = NVVM::LdMatrixOp::create(
          b, loc, res, smemAddr(base, index, in), b.getI32IntegerAttr(num),
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
    auto ldmatrixA = [&](int64_t tm, int64_t k0) {
      Value row = arith::AddIOp::create(b, loc, warpRow,
                                        arith::AddIOp::create(b, loc, lane8,
                                                              arith::MulIOp::create(b, loc, quadLo, i32(8))));
      row = arith::AddIOp::create(b, loc, row, i32(tm * 16));
      Value col = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadHi, i32(8)), i32(k0));
      return ldmatrix(0, swizzled(row, col, K), 4, false);
    };
    // B (16 x 16 at k0.., n0..) transposed: matrices (k 0-7 | 8-15) x (n 0-7 | 8-15)
    // give b0, b1 of two adjacent 8-column mma tiles.
    auto ldmatrixB = [&](int64_t tn, int64_t k0) {
      Value k = arith::AddIOp::create(b, loc, lane8,
                                      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadLo, i32(8)), i32(k0)));
      Value n = arith::AddIOp::create(b, loc, warpCol,
                                      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, quadHi, i32(8)), i32(tn * 8)));
      return ldmatrix(bBase, swizzled(k, n, N), 4, true);
    };
    bool pairsOfB = m.tilesN() % 2 == 0;
    NVVM::MMATypes ptxType = in.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      Value kLo = arith::AddIOp::create(b, loc, pairCol, i32(k0));
      Value kHi = arith::AddIOp::create(b, loc, pairCol, i32(k0 + 8));
      SmallVector<SmallVector<Value>> bFrags;
      if (useLdmatrix && pairsOfB) {
        for (int64_t tn = 0; tn < m.tilesN(); tn += 2) {
          auto r = ldmatrixB(tn, k0);
          bFrags.push_back({r[0], r[1]});
          bFrags.push_back({r[2], r[3]});
        }
      } else {
        for (int64_t tn = 0; tn < m.tilesN(); ++tn) {
          Value n = arith::AddIOp::create(b, loc, colBase, i32(tn * 8));
          auto idx = [&](Value k) { return useLdmatrix ? swizzled(k, n, N) : Value(); };
          if (!useLdmatrix) {
            bFrags.push_back({loadPairB(kLo, n), loadPairB(kHi, n)});
            continue;
          }
          // Element loads through the swizzled layout.
          auto pairAt = [&](Value k) -> Value {
            Value v = LLVM::UndefOp::create(b, loc, pair);
            v = LLVM::InsertElementOp::create(b, loc, v, loadSmem(bBase, idx(k), in), i32(0));
            Value k1 = arith::AddIOp::create(b, loc, k, i32(1));
            return operand(LLVM::InsertElementOp::create(b, loc, v, loadSmem(bBase, idx(k1), in), i32(1)));
          };
          bFrags.push_back({pairAt(kLo), pairAt(kHi)});
        }
      }
      for (int64_t tm = 0; tm < m.tilesM(); ++tm) {
        Value r0 = arith::AddIOp::create(b, loc, rowBase, i32(tm * 16));
        Value r1 = arith::AddIOp::create(b, loc, rowBase, i32(tm * 16 + 8));
        SmallVector<Value> aFrag = useLdmatrix ? ldmatrixA(tm, k0)
                                               : SmallVector<Value>{loadPairA(r0, kLo), loadPairA(r1, kLo),
                                                                    loadPairA(r0, kHi), loadPairA(r1, kHi)};
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
    barrier();
    if (acc.size() == 1)
      acc.assign(m.perThread(), acc[0]);
    values[dot] = acc;
    mma[dot] = m;
    return success();
  }
};

struct ConvertKilnToGpuPass : kiln::impl::ConvertKilnToGpuBase<ConvertKilnToGpuPass> {
  using ConvertKilnToGpuBase::ConvertKilnToGpuBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (numWarps < 1 || numWarps > 32) {
      module.emitError("num-warps must be in [1, 32], got ") << numWarps;
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> kernels;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        kernels.push_back(f);
    if (kernels.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    OpBuilder b(ctx);
    for (func::FuncOp f : kernels) {
      Location loc = f.getLoc();
      b.setInsertionPoint(f);
      auto gpuModule = gpu::GPUModuleOp::create(b, loc, (f.getName() + "_module").str());
      b.setInsertionPointToStart(gpuModule.getBody());
      SmallVector<Type> args;
      for (Type t : f.getArgumentTypes())
        args.push_back(isa<kiln::PtrType>(t) ? Type(b.getI64Type()) : t);
      auto gpuFunc = gpu::GPUFuncOp::create(b, loc, f.getName(), FunctionType::get(ctx, args, {}));
      gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
      int threads = numWarps * 32;
      gpuFunc.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(ctx, {threads, 1, 1}));
      Emitter emitter(b, loc, threads, gpuModule);
      if (failed(emitter.run(f, gpuFunc)))
        return signalPassFailure();
      f.erase();
    }
  }
};

} // namespace
