//===- GpuEmitter.h - kiln tiles as per-thread scalar code (internal) -----===//
//
// What the conversion patterns of convert-kiln-to-gpu share: every tile
// value is lowered to the elements one thread holds under the layout its
// type carries (chosen by the layout passes), with helpers for index
// arithmetic, shared memory, vector packing and the tensor-core layouts'
// geometry. Each op family's patterns are in their own file:
//
//   ElementwiseToGpu.cpp    constants, arith/math ops, kiln.select, kiln.cast
//   ShapeToGpu.cpp          make_range, splat, expand_dims, reshape, broadcast, trans
//   LoadStoreToGpu.cpp      addptr, load, store, atomic_add, rings and async copies,
//                           the barrier and fence helpers (GPU and NVVM ops)
//   ReduceToGpu.cpp         reduce, argmax
//   DotToGpu.cpp            dot (wgmma, mma.sync from shared memory or registers, or FMA), dot_wait
//   ConvertLayoutToGpu.cpp  convert_layout (and index arithmetic recomputed in a layout)
//   ControlFlowToGpu.cpp    scf.for and its carried tiles, program ids, return
//   GpuEmitter.cpp          elements per thread, binding operands, replacing results,
//                           the shared-memory and vector helpers (LLVM dialect ops)
//
// ConvertKilnToGpu.cpp holds the pass: the type converter, the legality of
// the result, and the kernel (gpu.func, shared-memory plan).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_LOWERING_GPUEMITTER_H
#define KILN_LOWERING_GPUEMITTER_H

#include "Analysis/AxisInfo.h"
#include "ElementOps.h"
#include "Layouts/LayoutUtils.h"

#include "kiln/Dialect/KilnDialect.h"

// Only the dialects whose ops the inline helpers below create (arith, scf):
// the helpers that emit LLVM dialect ops are defined in GpuEmitter.cpp, those
// that emit GPU and NVVM ops in LoadStoreToGpu.cpp, so that the pattern files
// that emit none do not parse LLVMDialect.h, GPUDialect.h or NVVMDialect.h.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <functional>
#include <optional>

namespace kiln::gpu_lowering {

using namespace mlir;


/// The most shared memory one CTA may use on sm_90 (227 KB); devices with
/// less are checked when the kernel is loaded.
inline constexpr int64_t kMaxSmem = 227 * 1024;
/// The dynamic shared-memory array every kernel addresses...
inline constexpr const char *kSmemName = "kiln_smem";
/// ...and a global holding its size in bytes, which the runtime reads to
/// launch the kernel with that much dynamic shared memory.
inline constexpr const char *kSmemBytesName = "kiln_smem_bytes";
/// The TMA tensor maps the runtime encodes at launch (see recordTensorMaps),
/// and the gpu.func attribute listing the arguments that receive them.
inline constexpr const char *kTensorMapsName = "kiln_tensormaps";
inline constexpr const char *kTensorMapArgsName = "kiln.tensormap_args";
/// Globals telling the runtime how to launch a kernel that differs from
/// the plain one: the threads per CTA when producer warps come after the
/// program's, and the first of the three arguments that receive the grid a
/// persistent kernel was launched for.
inline constexpr const char *kThreadsName = "kiln_threads";
inline constexpr const char *kVirtualGridName = "kiln_virtual_grid";
/// A global present (= 1) when the kernel contains kiln.grid_dependency_wait:
/// the runtime launches it as a programmatic dependent launch.
inline constexpr const char *kDependentLaunchName = "kiln_dependent_launch";
/// A global holding the cluster size (programs along x) of a kernel with
/// kiln.cluster_reduce, which the runtime checks launches against.
inline constexpr const char *kClusterSizeName = "kiln_cluster_size";
/// The gpu.func attribute that becomes the kernel's .reqnctapercluster.
inline constexpr const char *kClusterDimName = "kiln.cluster_dim";
/// The gpu.func attribute giving a kernel's registers per thread at launch
/// (PTX .maxnreg), set when its warps trade registers (setmaxnreg).
inline constexpr const char *kMaxRegistersName = "kiln.maxnreg";
/// The scf.if whose "then" branch is a kiln.producer's body.
inline constexpr const char *kProducerBranchName = "kiln.producer_branch";

/// Which elements of a value a thread holds.
struct Layout {
  int64_t numel = 1;
  int64_t perThread = 1;
  bool distributed = false; ///< thread t holds groups of `vec` consecutive flat elements
  int64_t vec = 1;          ///< elements per group (consecutive along the last dimension)
  /// Threads holding each element: 1 for a distributed tile, every thread
  /// for a replicated one (a scalar, a tile smaller than the CTA). The
  /// copies of thread t's elements are in threads t + k * (T / copies).
  int64_t copies = 1;
};

inline int64_t byteSize(Type t) {
  if (isa<kiln::PtrType>(t))
    return 8;
  return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
}

/// The elements a thread holds of a value of type `t` in a CTA of `threads`
/// threads, under the layout its type carries: what convert-kiln-to-gpu's
/// type converter turns a tile into (a scalar is one value; a tile in
/// shared memory is one value, its byte offset).
int64_t elementsPerThread(Type t, int threads);
/// The types a value of type `t` is lowered to: its elements per thread,
/// pointers as i64 addresses, and shared memory (rings, tiles in #kiln.shared)
/// as an i32 byte offset.
void lowerType(Type t, int threads, SmallVectorImpl<Type> &out);

/// What the patterns of convert-kiln-to-gpu share while one kernel is
/// converted: the thread's coordinates, the shared-memory plan, the analysis
/// of the source kernel, and the elements each source value was lowered to.
struct LoweringState {
  LoweringState(int threads, Operation *module) : threads(threads), module(module) {}
  int threads;
  /// The gpu.module the kernel is lowered into (held as an Operation so that
  /// this header needs no GPUDialect.h).
  Operation *module;
  /// Thread, lane and warp index (i32), computed at the kernel's entry (in
  /// a persistent kernel, at the start of each tile: see convertKernel).
  Value tid, lane, warp;
  /// The thread index computed at the kernel's entry, for the ops that run
  /// before the program's warps and any producer warps part.
  Value entryTid;
  /// The elements each source value was lowered to; a tile that holds one
  /// value for every element (a splat, and what is computed from splats
  /// alone) is held as that one value. The conversion's own mapping holds
  /// every element (see Emitter::bindOperands and Emitter::replace).
  DenseMap<Value, SmallVector<Value>> values;
  /// Strides and prefix masks along the last dimension (see AxisInfo).
  std::optional<AxisInfo> axis;
  /// Byte offset of each kiln.local_alloc ring in shared memory.
  DenseMap<Value, int64_t> ringOffsets;
  /// Shared memory holds the rings at [0, scratchBase), then a scratch area
  /// reused by every op that exchanges data between threads.
  int64_t scratchBase = 0;
  int64_t smemBytes = 0;
  /// The kernel's top-level ops after a CTA barrier past which no ring is
  /// live but the mbarrier rings, at [0, deadRingsBase) (none where rings
  /// live until the end: producer warps, persistent tile loops). They and
  /// the ops in them exchange data through a scratch area at deadRingsBase,
  /// in the rings' bytes: the epilogue reuses the main loop's buffers.
  DenseSet<Operation *> afterRings;
  int64_t deadRingsBase = 0;
  /// Where `op`'s scratch area starts.
  int64_t scratchBaseFor(Operation *op) const {
    for (Operation *p = op; p && !afterRings.empty(); p = p->getParentOp())
      if (afterRings.contains(p))
        return deadRingsBase;
    return scratchBase;
  }
  /// Vector-load groups given a branch to their element-load path so far
  /// (see loadGroup).
  int slowPaths = 0;
  /// Tensor cores read the rings through the async proxy (wgmma): copies
  /// into them are fenced before the barrier that publishes them.
  bool asyncProxyReads = false;
  /// TMA writes the rings, in the 128-byte swizzle that repeats every 1024 bytes.
  bool tmaCopies = false;
  /// Threads of the kernel's producer warps (kiln.producer), after the
  /// `threads` of the program's own warps; 0 when it has none.
  int producerThreads = 0;
  /// An op's lowering reported an error.
  bool failed = false;
};

/// Lowers one source op: the shared state seen through the builder of the
/// pattern being applied, with the helpers every op family uses. Each
/// pattern of convert-kiln-to-gpu makes one (see KilnToGpuPattern).
class Emitter {
public:
  Emitter(ConversionPatternRewriter &rewriter, Operation *op, LoweringState &state)
      : b(rewriter), loc(op->getLoc()), state(state), scratchBase(state.scratchBaseFor(op)) {}

  /// Makes the converted operands of `op` (one range per operand, every
  /// element in it) the elements of the source operands not lowered by a
  /// pattern of this pass: loop-carried values and loop results, which the
  /// structural conversion of scf.for creates, and scalars left as they are.
  LogicalResult bindOperands(Operation *op, ArrayRef<ValueRange> operands);
  /// Replaces `op` by the elements its results were lowered to, each
  /// expanded to every element of its converted type.
  void replace(Operation *op);

  ConversionPatternRewriter &b;
  Location loc;
  LoweringState &state;

private:
  int &threads = state.threads;
  Operation *&module = state.module;
  int &slowPaths = state.slowPaths;
  Value &tid = state.tid, &lane = state.lane, &warp = state.warp;
  DenseMap<Value, SmallVector<Value>> &values = state.values;
  int64_t &smemBytes = state.smemBytes;
  /// This op's scratch area (see LoweringState::scratchBaseFor).
  int64_t scratchBase;

  //===--------------------------------------------------------------------===//
  // Layouts and small helpers
  //===--------------------------------------------------------------------===//

  /// The elements a thread holds of a tile in #kiln.blocked or
  /// #kiln.replicated layout (or of a scalar: every thread holds it).
  Layout layoutOf(Type t) const {
    Layout l;
    auto tile = dyn_cast<RankedTensorType>(t);
    if (!tile) {
      l.copies = threads;
      return l;
    }
    l.numel = tile.getNumElements();
    if (auto blocked = dyn_cast_or_null<kiln::BlockedLayoutAttr>(tile.getEncoding())) {
      l.distributed = true;
      l.perThread = l.numel / threads;
      l.vec = blocked.getVec();
      return l;
    }
    l.perThread = l.numel;
    l.copies = threads;
    return l;
  }
  /// The elements a thread holds of a tile in any register layout.
  int64_t perThreadOf(Type t) const { return elementsPerThread(t, threads); }

  Value i32(int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v)); }

  /// a && b, where a null value stands for true (no mask, no owner test).
  Value both(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return arith::AndIOp::create(b, loc, x, y);
  }
  /// i1: this thread performs the side effects (global stores) for the
  /// elements it holds in layout `l`, being the lowest-numbered of the
  /// threads holding copies of them; null when every element has one holder.
  /// Had every copy store, a warp that runs late could read an address after
  /// another warp has written it and write again from the stale value.
  Value ownsElements(const Layout &l) {
    if (l.copies == 1)
      return Value();
    int64_t span = threads / l.copies; // threads that hold distinct elements
    if (span == 1)
      return isZero(tid);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid, i32(span));
  }

  /// Flat (row-major) index of this thread's j-th element.
  Value flatIndex(const Layout &l, int64_t j) {
    if (!l.distributed)
      return i32(j);
    // group g = j / vec holds flat elements (g * T + tid) * vec + [0, vec)
    int64_t g = j / l.vec, v = j % l.vec;
    Value t = l.vec == 1 ? tid : Value(arith::MulIOp::create(b, loc, tid, i32(l.vec)));
    return arith::AddIOp::create(b, loc, t, i32(g * threads * l.vec + v));
  }

  /// Strides and prefix masks along the last dimension (see AxisInfo),
  /// which decide the vector accesses.
  std::optional<int64_t> strideOf(Value v) const { return state.axis->stride(v); }
  bool isPrefix(Value mask) const { return state.axis->isPrefixMask(mask); }

  /// A distributed tile of exactly one element per thread: its one value is
  /// this thread's element, not a value shared by every element.
  bool oneEach(Type t) const {
    if (mmaOf(t) || inSlice(t))
      return false;
    Layout l = layoutOf(t);
    return l.distributed && l.perThread == 1;
  }
  /// `v` is held as one value that stands for every element (a splat, a
  /// scalar). One value may also be a thread's only element; see oneEach.
  bool isUniform(Value v) {
    auto it = values.find(v);
    assert(it != values.end() && "value emitted before use");
    return it->second.size() == 1 && !oneEach(v.getType());
  }

  /// The elements this thread holds of `v` in the value's own layout.
  SmallVector<Value> raw(Value v) {
    auto it = values.find(v);
    assert(it != values.end() && "value emitted before use");
    return it->second;
  }
  Value elem(Value v, int64_t j) {
    auto vs = raw(v);
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
  /// The accumulator layout of a #kiln.mma tile.
  static std::optional<Mma> mmaOf(Type t) {
    auto tile = dyn_cast<RankedTensorType>(t);
    auto mma = tile ? dyn_cast_or_null<kiln::MmaLayoutAttr>(tile.getEncoding()) : kiln::MmaLayoutAttr();
    if (!mma)
      return std::nullopt;
    return Mma{tile.getDimSize(0), tile.getDimSize(1), mma.getWarpsM(), mma.getWarpsN()};
  }
  static std::optional<Mma> mmaOf(Value v) { return mmaOf(v.getType()); }

  /// (row, column) of this thread's j-th accumulator element.
  std::pair<Value, Value> mmaRowCol(const Mma &m, int64_t j) {
    int64_t tile = j / 4, r = j % 4;
    int64_t tn = tile % m.tilesN();
    Value wc = arith::RemUIOp::create(b, loc, warp, i32(m.wn));
    Value col = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, wc, i32(m.N / m.wn)),
        arith::AddIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, lane, i32(4)), i32(2)),
            i32(tn * 8 + (r & 1))));
    return {rowOf(m, rowSlot(m, j)), col};
  }
  /// Flat (row-major) index of this thread's j-th accumulator element.
  Value mmaFlat(const Mma &m, int64_t j) {
    auto [row, col] = mmaRowCol(m, j);
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, row, i32(m.N)), col);
  }

  //===--------------------------------------------------------------------===//
  // Row slices of an accumulator layout
  //===--------------------------------------------------------------------===//

  /// A tile of M elements along its first dimension ((M) or (M, 1)) held as
  /// the rows of accumulator layout `m`, as a reduction along a row leaves
  /// them: a thread holds the 2 * tilesM() rows its accumulator elements lie
  /// in, so that broadcasting back along the row moves nothing. The four
  /// lanes of a quad and the wn warps of a warp row hold the same values.
  /// The accumulator rows of a #kiln.slice<dim = 1> tile (N is unused).
  static std::optional<Mma> rowsOf(Type t) {
    auto tile = dyn_cast<RankedTensorType>(t);
    auto slice = tile ? dyn_cast_or_null<kiln::SliceLayoutAttr>(tile.getEncoding()) : kiln::SliceLayoutAttr();
    if (!slice || slice.getDim() != 1)
      return std::nullopt;
    auto mma = cast<kiln::MmaLayoutAttr>(slice.getParent());
    return Mma{tile.getDimSize(0), 0, mma.getWarpsM(), mma.getWarpsN()};
  }
  static std::optional<Mma> rowsOf(Value v) { return rowsOf(v.getType()); }
  static int64_t rowsPerThread(const Mma &m) { return m.tilesM() * 2; }
  /// The slot of the row slice that accumulator element j lies in.
  static int64_t rowSlot(const Mma &m, int64_t j) {
    return (j / 4) / m.tilesN() * 2 + (j % 4 >= 2 ? 1 : 0);
  }
  /// Layouts whose threads hold the same rows.
  static bool sameRows(const Mma &x, const Mma &y) {
    return x.M == y.M && x.wm == y.wm && x.wn == y.wn;
  }
  /// The row of slot i of a row slice.
  Value rowOf(const Mma &m, int64_t i) {
    Value wr = arith::DivUIOp::create(b, loc, warp, i32(m.wn));
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, wr, i32(m.M / m.wm)),
        arith::AddIOp::create(b, loc, arith::DivUIOp::create(b, loc, lane, i32(4)),
                              i32((i / 2) * 16 + (i % 2) * 8)));
  }
  /// Whether this thread is the one that writes its rows (lane 0 of its quad, first warp column).
  Value ownsRows(const Mma &m) {
    Value first = isZero(arith::RemUIOp::create(b, loc, lane, i32(4)));
    if (m.wn == 1)
      return first;
    return arith::AndIOp::create(b, loc, first, isZero(arith::RemUIOp::create(b, loc, warp, i32(m.wn))));
  }
  //===--------------------------------------------------------------------===//
  // Column slices of an accumulator layout
  //===--------------------------------------------------------------------===//

  /// A tile of N elements along its last dimension ((N) or (1, N)) held as
  /// the columns of accumulator layout `m`: a thread holds the 2 * tilesN()
  /// columns its accumulator elements lie in (columns 2 * (lane % 4) and
  /// 2 * (lane % 4) + 1 of each 8-column tile of its warp column), so that
  /// broadcasting along the columns (a bias row) moves nothing. The eight
  /// quads of a warp and the wm warps of a warp column hold the same values.
  /// The accumulator columns of a #kiln.slice<dim = 0> tile (M is unused).
  static std::optional<Mma> colsOf(Type t) {
    auto tile = dyn_cast<RankedTensorType>(t);
    auto slice = tile ? dyn_cast_or_null<kiln::SliceLayoutAttr>(tile.getEncoding()) : kiln::SliceLayoutAttr();
    if (!slice || slice.getDim() != 0)
      return std::nullopt;
    auto mma = cast<kiln::MmaLayoutAttr>(slice.getParent());
    return Mma{0, tile.getShape().back(), mma.getWarpsM(), mma.getWarpsN()};
  }
  static std::optional<Mma> colsOf(Value v) { return colsOf(v.getType()); }
  /// Either kind of slice: tiles that only a few ops know how to hold.
  static bool inSlice(Type t) { return rowsOf(t) || colsOf(t); }
  static int64_t colsPerThread(const Mma &m) { return m.tilesN() * 2; }
  /// The slot of the column slice that accumulator element j lies in.
  static int64_t colSlot(const Mma &m, int64_t j) { return (j / 4) % m.tilesN() * 2 + (j & 1); }
  static bool sameCols(const Mma &x, const Mma &y) { return x.N == y.N && x.wm == y.wm && x.wn == y.wn; }
  /// The column of slot i of a column slice.
  Value colOf(const Mma &m, int64_t i) {
    Value wc = arith::RemUIOp::create(b, loc, warp, i32(m.wn));
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, wc, i32(m.N / m.wn)),
        arith::AddIOp::create(b, loc,
                              arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, lane, i32(4)), i32(2)),
                              i32((i / 2) * 8 + (i % 2))));
  }
  /// Whether this thread is the one that writes its columns (the first quad
  /// of its warp, first warp row).
  Value ownsCols(const Mma &m) {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane, i32(4));
    if (m.wm == 1)
      return first;
    return arith::AndIOp::create(b, loc, first,
                                 arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, warp, i32(m.wn)));
  }
  /// `v`, of N elements along its last dimension, as a column slice of `m`
  /// (recomputed for index arithmetic, otherwise through shared memory).
  SmallVector<Value> toCols(Value v, const Mma &m);
  /// `v` as `slots` values, slot i being its element at index at(i) along its
  /// first dimension (or, alongColumns, its last): toRows and toCols.
  SmallVector<Value> toSlice(Value v, int64_t slots, bool alongColumns, function_ref<Value(int64_t)> at);
  /// Accumulator layout `to` of a broadcast along the columns of column slice `in`.
  SmallVector<Value> broadcastCols(ArrayRef<Value> in, const Mma &to) {
    SmallVector<Value> out;
    for (int64_t j = 0; j < to.perThread(); ++j)
      out.push_back(in[colSlot(to, j)]);
    return out;
  }

  /// `v`, of M elements along its first dimension, as a row slice of `m`
  /// (recomputed for index arithmetic, otherwise through shared memory).
  SmallVector<Value> toRows(Value v, const Mma &m);
  /// Accumulator layout `to` of a broadcast along the rows of row slice `in`.
  SmallVector<Value> broadcastRows(ArrayRef<Value> in, const Mma &to) {
    SmallVector<Value> out;
    for (int64_t j = 0; j < to.perThread(); ++j)
      out.push_back(in[rowSlot(to, j)]);
    return out;
  }

  /// The elements of `v` in accumulator layout `m` (through shared memory
  /// unless `v` is uniform or already there).
  SmallVector<Value> toMma(Value v, const Mma &m);



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

  // Shared memory holds the rings of kiln.local_alloc at [0, scratchBase),
  // then a scratch area reused by every op that exchanges data between
  // threads (layout conversions, reductions, dot operands). Scratch offsets
  // below are relative to scratchBase.

  Value smemPtr(Value byteOffset);
  Value smemAddr(int64_t baseBytes, Value index, Type elem) {
    return smemPtr(arith::AddIOp::create(b, loc, i32(scratchBase + baseBytes),
                                         arith::MulIOp::create(b, loc, index, i32(byteSize(elem)))));
  }
  void reserveSmem(int64_t bytes) { smemBytes = std::max(smemBytes, scratchBase + bytes); }
  /// Synchronises the program's threads: every thread, or, in a kernel with
  /// producer warps (which never take part), the program's own warps on
  /// named barrier 1.
  void barrier();
  /// Synchronises every thread of the CTA (producer warps included).
  void barrierAll();
  /// Orders this thread's ordinary shared-memory writes before reads by the
  /// async proxy (wgmma's operands); a barrier then publishes them.
  void fenceForAsyncProxy();
  /// The A fragment (rows r, r + 8 of a 16-row block at k, k + 8: four pairs
  /// of consecutive columns) of a product whose A operand is the elements
  /// `acc` of an accumulator, from its 8-column tiles `tile` and `tile + 1`.
  SmallVector<Value> accumulatorFragmentA(ArrayRef<Value> acc, int64_t tile) {
    SmallVector<Value> pairs;
    for (int64_t t : {tile, tile + 1})
      for (int64_t r : {0, 2})
        pairs.push_back(pack({pick(acc, t * 4 + r), pick(acc, t * 4 + r + 1)}));
    return pairs;
  }
  /// Emits `body` under `cond` (an scf.if without else); unconditionally
  /// when `cond` is null.
  void onlyIf(Value cond, function_ref<void()> body) {
    if (!cond)
      return body();
    auto ifOp = scf::IfOp::create(b, loc, cond, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  }
  Value isZero(Value x) { return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, i32(0)); }

  void storeSmem(int64_t base, Value index, Value v);
  Value loadSmem(int64_t base, Value index, Type elem);
  /// Index of element (row, col) of a (rows, cols) matrix of `elemBytes`-byte
  /// elements (2 or 4) in shared memory with its 16-byte chunks XOR-swizzled
  /// by the row, so that the eight rows an ldmatrix reads fall in different
  /// banks. Rows longer than 128 bytes are stored as panels of 128-byte rows
  /// (64 16-bit or 32 32-bit columns; rows x panel columns each, one after
  /// the other): each panel is then exactly the 128-byte swizzle of wgmma's
  /// matrix descriptors (and of TMA), 16-byte chunk c of row r at chunk
  /// c ^ (r % 8) of its 128-byte row, on a 1024-byte aligned base.
  Value swizzled(Value row, Value col, int64_t rows, int64_t cols, int64_t elemBytes) {
    int64_t panelCols = panelColsOf(elemBytes), chunkElems = 16 / elemBytes;
    if (cols > panelCols) {
      Value panel = arith::DivUIOp::create(b, loc, col, i32(panelCols));
      Value within = arith::RemUIOp::create(b, loc, col, i32(panelCols));
      return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, panel, i32(rows * panelCols)),
                                   swizzled(row, within, rows, panelCols, elemBytes));
    }
    int64_t chunks = cols / chunkElems;
    int64_t mask = std::min<int64_t>(chunks, 8) - 1;
    Value chunk = arith::DivUIOp::create(b, loc, col, i32(chunkElems));
    Value within = arith::RemUIOp::create(b, loc, col, i32(chunkElems));
    Value perm = arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, i32(mask)));
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, row, i32(cols)),
        arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, perm, i32(chunkElems)), within));
  }
  /// Columns of a panel of a swizzled tile (128 bytes of a row).
  static constexpr int64_t panelColsOf(int64_t elemBytes) { return 128 / elemBytes; }
  /// Bytes per element of a tile that can be swizzled (16- or 32-bit elements).
  static int64_t elemBytesOf(RankedTensorType t) { return t.getElementType().getIntOrFloatBitWidth() / 8; }
  /// Tiles kept swizzled in shared memory (see kiln::layouts::keepsSwizzled).
  static bool keepsSwizzled(RankedTensorType t) { return kiln::layouts::keepsSwizzled(t); }

  /// A tile in shared memory: where it starts (bytes, dynamic) and how its
  /// elements are laid out (row-major, 16-byte chunks swizzled or not).
  struct SmemTile {
    Value base;
    RankedTensorType type;
    bool swizzled;
    /// Holds the transpose of the operand: operand element (r, c) is element
    /// (c, r) of `type` (the source of a kiln.trans).
    bool transposed = false;
    int64_t cols() const { return type.getShape().back(); }
  };
  /// The ring buffer a kiln.local_load with a #kiln.shared result reads in place.
  SmemTile ringTile(kiln::LocalLoadOp ll) {
    return SmemTile{raw(ll)[0], ll.getType(), keepsSwizzled(ll.getType())};
  }
  /// Element index of (row, col) of a 2-D tile.
  Value tileIndex(const SmemTile &t, Value row, Value col) {
    if (t.swizzled)
      return swizzled(row, col, t.type.getDimSize(0), t.cols(), elemBytesOf(t.type));
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, row, i32(t.cols())), col);
  }
  /// Element index of flat (row-major) element `flat`.
  Value tileIndex(const SmemTile &t, Value flat) {
    if (!t.swizzled)
      return flat;
    return swizzled(arith::DivUIOp::create(b, loc, flat, i32(t.cols())),
                    arith::RemUIOp::create(b, loc, flat, i32(t.cols())), t.type.getDimSize(0), t.cols(),
                    elemBytesOf(t.type));
  }
  Value tileAddr(const SmemTile &t, Value index) {
    Type elem = storageType(t.type.getElementType());
    return smemPtr(arith::AddIOp::create(b, loc, t.base,
                                         arith::MulIOp::create(b, loc, index, i32(byteSize(elem)))));
  }

public:
  /// Bytes between the buffers of a kiln.local_alloc ring (128-byte aligned).
  static int64_t ringStride(kiln::SharedType ring) {
    RankedTensorType tile = ring.getTileType();
    int64_t bytes = tile.getNumElements() * byteSize(tile.getElementType());
    return (bytes + 127) / 128 * 128;
  }

private:
  /// The buffer of ring `ring` (its lowered byte offset) at `stage`.
  Value ringBuffer(Value ring, Value stage) {
    auto type = cast<kiln::SharedType>(ring.getType());
    return arith::AddIOp::create(b, loc, raw(ring)[0],
                                 arith::MulIOp::create(b, loc, stage, i32(ringStride(type))));
  }

  /// Writes every element this thread holds of `v` at its flat index (for
  /// `swizzle`, at its swizzled index: 2-D 16-bit tiles); returns bytes used.
  /// Accumulators and row slices are written from their own layouts.
  int64_t spill(Value v, int64_t base, bool swizzle = false);

  /// Writes every element this thread holds of the 2-D tile `v` (rows x
  /// cols) transposed, element (r, c) at (c, r) of a (cols x rows) tile,
  /// swizzled when `swizzle`: a TF32 product's B operand, K-major. Returns
  /// bytes used.
  int64_t spillTransposed(Value v, int64_t base, bool swizzle) {
    auto tile = cast<RankedTensorType>(v.getType());
    Type stored = storageType(tile.getElementType());
    int64_t rows = tile.getDimSize(0), cols = tile.getDimSize(1);
    auto store = [&](Value row, Value col, Value x) {
      Value index = swizzle ? swizzled(col, row, cols, rows, byteSize(stored))
                            : arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, col, i32(rows)), row);
      storeSmem(base, index, x);
    };
    SmallVector<Value> own = raw(v);
    if (std::optional<Mma> acc = mmaOf(v); acc && own.size() > 1) {
      for (int64_t j = 0; j < acc->perThread(); ++j) {
        auto [row, col] = mmaRowCol(*acc, j);
        store(row, col, own[j]);
      }
    } else {
      Layout l = layoutOf(tile);
      for (int64_t j = 0; j < l.perThread; ++j) {
        Value flat = flatIndex(l, j);
        store(arith::DivUIOp::create(b, loc, flat, i32(cols)), arith::RemUIOp::create(b, loc, flat, i32(cols)),
              pick(own, j));
      }
    }
    return tile.getNumElements() * byteSize(stored);
  }

  /// Copies the 2-D f32 tile `ll` reads from its ring buffer, transposed,
  /// into the scratch area at `base` as a swizzled (cols x rows) tile:
  /// element (r, c) at (c, r). Each thread reads four consecutive rows of
  /// one column (a warp reads 32 consecutive columns of a row) and writes
  /// them as one 16-byte chunk of the transposed tile, so that neither side
  /// has bank conflicts (spilling a row-major register layout transposed
  /// writes 4-byte elements 16 ways into the same banks). Returns the bytes
  /// written, or 0 (nothing emitted) for tiles it does not handle.
  int64_t copyTransposed(kiln::LocalLoadOp ll, int64_t base);

  /// Elements per vector access for layout `l` and element type `t` (at most 16 bytes).
  int64_t vectorWidth(const Layout &l, Type t) {
    if (!l.distributed || l.vec == 1 || t.isInteger(1))
      return 1;
    return std::min<int64_t>(l.vec, 16 / byteSize(t));
  }
  Value pack(ArrayRef<Value> elems);
  SmallVector<Value> unpack(Value vec, int64_t n);

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

public:
  LogicalResult emitConstant(arith::ConstantOp c);

  LogicalResult emitElementwise(Operation *op);

  LogicalResult emitBroadcast(kiln::BroadcastOp bc);
  /// kiln.make_range, splat, expand_dims and reshape.
  LogicalResult emitShape(Operation *op);

  LogicalResult emitAddPtr(kiln::AddPtrOp ap);

  Value globalPtr(Value addr);

  /// i1: `addr` is a multiple of `bytes` and every mask in `masks` is set,
  /// so that one vector access can serve the whole group (for a `prefix`
  /// mask, see isPrefix, the last bit says so).
  Value vectorizable(Value addr, int64_t bytes, ArrayRef<Value> masks, bool prefix);

  /// An scf.for over [lb, ub) carrying `inits`; `body(iv, carried)` returns
  /// the next carried values.
  scf::ForOp emitLoop(int64_t lb, int64_t ub, ValueRange inits,
                      function_ref<SmallVector<Value>(Value, ValueRange)> body);

  /// A group of `width` loads: one vector load when the pointers are
  /// consecutive (known statically), the first is aligned and every mask bit is
  /// set (checked at run time), element loads otherwise.
  SmallVector<Value> loadGroup(Type elemType, bool prefix, ArrayRef<Value> addrs, ArrayRef<Value> masks,
                               ArrayRef<Value> fills);

  Value loadOne(Type elemType, Value addr, Value mask, Value fill);
  /// The addresses of `width` consecutive elements from `first`.
  SmallVector<Value> consecutive(Value first, int64_t width, Type elemType);
  /// loadOne of each element of a group (masks and fills may be empty).
  SmallVector<Value> loadElements(Type elemType, ArrayRef<Value> addrs, ArrayRef<Value> masks,
                                  ArrayRef<Value> fills);

  LogicalResult emitLoad(kiln::LoadOp ld);

  LogicalResult emitStore(kiln::StoreOp st);

  void storeOne(Value addr, Value v, Value mask);
  /// A global store of `v` (up to 8 bytes) that only runs where `pred`
  /// holds: one predicated PTX instruction, no branch.
  void predicatedStore(Value addr, Value v, Value pred);

  Value combine(kiln::ReduceKind kind, Value x, Value y) { return kiln::emitCombine(b, loc, kind, x, y); }

  /// A reduction whose threads' partial results meet in shared memory, in
  /// two phases around a barrier: `publish` combines this thread's elements
  /// (in registers, then across lanes by shuffles) and stores its partial
  /// results `bytes` bytes from a scratch offset; after the barrier,
  /// `collect` reads and combines them into the reduction's elements.
  /// Independent reductions in a row share one barrier for all their
  /// publishes and one after all their collects (see emitReduce).
  struct Exchange {
    int64_t bytes = 0;
    std::function<void(int64_t)> publish;
    std::function<SmallVector<Value>(int64_t)> collect;
  };
  /// The exchange `red` lowers to (nullopt: it exchanges nothing, or not in
  /// two phases). Creates no IR itself.
  std::optional<Exchange> exchangeFor(kiln::ReduceOp red);

  LogicalResult emitReduce(kiln::ReduceOp red);
  /// A reduction along the rows of an accumulator (f32, f16, bf16, i32), into
  /// a row slice of its layout: per thread, then across the quad's lanes by
  /// shuffles (the partials of the warp row's first warp column's thread).
  bool reducesRows(kiln::ReduceOp red);
  /// This warp's combination of the elements its threads hold of the 1-D
  /// tile `source`, in `acc` (16-bit floats widened): per thread, then
  /// butterfly shuffles, so every lane holds it.
  Value warpTotal(Value source, kiln::ReduceKind kind, Type acc);
  /// `v` (combined in f32) back to 16-bit `elemType`; as it is otherwise.
  Value narrowTo(Type elemType, Value v);
  SmallVector<Value> rowPartials(kiln::ReduceOp red);
  /// kiln.atomic_add: fence, barrier, one acquire-release atomic by thread 0,
  /// its result broadcast through shared memory, fence.
  LogicalResult emitAtomicAdd(kiln::AtomicAddOp op);
  /// A global load of `type` (up to 16 bytes) that only runs where `pred`
  /// holds (0 elsewhere): one predicated PTX instruction, no branch.
  Value predicatedLoad(Type type, Value addr, Value pred);
  /// Whether `v` is index arithmetic that can be recomputed per element
  /// (rematerialize: `v` at multi-index `idx` of its shape).
  bool canRematerialize(Value v, int depth);
  Value rematerialize(Value v, ArrayRef<Value> idx);
  /// Reductions along the last axis, or axis 0 of a matrix, with
  /// per-thread combining, warp shuffles and one round through shared memory
  /// (nullopt: the layout does not allow it; foldAlong is used).
  std::optional<Exchange> reduceAxisInParallel(kiln::ReduceOp red);

  LogicalResult emitArgMax(kiln::ArgMaxOp am);
  /// Folds `src` along `axis` through shared memory: thread t folds the rows
  /// of result elements t, t + T, ... in a loop, `first(x0)` giving the
  /// carried values and `step(carried, x, k)` the next ones (carried[0] is
  /// the result); then every thread reads the result elements its layout holds.
  SmallVector<Value> foldAlong(Value src, Type resultType, int64_t axis, Type resultElem,
                               function_ref<SmallVector<Value>(Value)> first,
                               function_ref<SmallVector<Value>(ValueRange, Value, Value)> step);

  LogicalResult emitDot(kiln::DotOp dot);

  /// kiln.program_id and kiln.num_programs.
  LogicalResult emitProgramInfo(Operation *op);
  /// Shared-memory barriers and TMA copies (Hopper), as inline PTX.
  LogicalResult emitBarrier(kiln::BarrierOp op);
  /// Programmatic dependent launch: griddepcontrol.wait (ordered with every
  /// memory access, like a compiler fence) and griddepcontrol.launch_dependents.
  LogicalResult emitGridDependencyWait(kiln::GridDependencyWaitOp op);
  LogicalResult emitLaunchDependents(kiln::LaunchDependentsOp op);
  /// Thread-block clusters: each program publishes its values in its
  /// shared memory, a cluster barrier, every thread reads what it needs of
  /// the cluster's values through distributed shared memory (mapa +
  /// ld.shared::cluster), and a second cluster barrier keeps them alive
  /// until the whole cluster has read them.
  LogicalResult emitClusterReduce(kiln::ClusterReduceOp op);
  LogicalResult emitClusterGather(kiln::ClusterGatherOp op);
  /// barrier.cluster.arrive.release + wait.acquire: every thread of the
  /// cluster's programs, the program's own threads included.
  void clusterBarrier();
  /// f32 at 32-bit shared address `own` of this program, in the program of
  /// rank `rank` of its cluster.
  Value loadFromRank(Value own, Value rank);
  /// kiln.prefetch: prefetch.global.L2 of each element this thread owns
  /// (predicated on the mask), no result, nothing waits for it.
  LogicalResult emitPrefetch(kiln::PrefetchOp op);
  LogicalResult emitAtomicAccumulate(kiln::AtomicAccumulateOp op);
  LogicalResult emitMBarrierInit(kiln::MBarrierInitOp op);
  LogicalResult emitMBarrierArrive(kiln::MBarrierArriveOp op);
  LogicalResult emitMBarrierWait(kiln::MBarrierWaitOp op);
  /// One thread announces the tile's bytes to the barrier and copies it, one
  /// bulk tensor copy per 128-byte-wide panel (the swizzled layout of swizzled()).
  LogicalResult emitAsyncTmaCopy(kiln::AsyncTmaCopyOp op);
  LogicalResult emitTmaStore(kiln::TmaStoreOp op);
  /// The 32-bit shared-memory address of barrier `index` of ring `barriers`.
  Value barrierAddr(Value barriers, Value index);
  /// i1: `pred` (when given) and this is thread 0.
  /// i1: the one thread that acts for the program (where `pred` holds):
  /// thread 0, or the first producer thread for ops of `op`'s kiln.producer.
  Value electedThread(Operation *op, Value pred);
  /// kiln.local_alloc: the ring's byte offset, placed before the scratch area.
  LogicalResult emitLocalAlloc(kiln::LocalAllocOp alloc);
  /// kiln.async_commit and kiln.async_wait (which also synchronises the CTA).
  LogicalResult emitAsyncGroup(Operation *op);
  LogicalResult emitAsyncCopy(kiln::AsyncCopyOp cp);
  LogicalResult emitLocalLoad(kiln::LocalLoadOp ll);
  /// A #kiln.shared operand of a product: in place for a kiln.local_load
  /// result, its source's tile for a kiln.trans (transposed), otherwise the
  /// source of its conversion staged in scratch at `scratchOffset` (advanced
  /// past it).
  SmemTile operandTile(Value v, int64_t &scratchOffset, int64_t align = 16);
  /// kiln.convert_layout: moves the elements between threads (see toMma,
  /// toRows, toCols, toDefault) or, for compatible layouts, nothing.
  LogicalResult emitConvertLayout(kiln::ConvertLayoutOp op);
  /// `v` (an accumulator or row slice) in the #kiln.blocked / replicated
  /// layout of `to`, through shared memory.
  SmallVector<Value> toDefault(Value v, Type to);
  /// kiln.trans: through shared memory, unless the result is a #kiln.shared
  /// view that tensor-core dots read.
  LogicalResult emitTrans(kiln::TransOp t);

  /// dot on tensor cores: A and B are staged in shared memory (row-major),
  /// each warp loads its A (16x16) and B (16x8) fragments and issues
  /// mma.sync.m16n8k16 with f32 accumulation into the accumulator layout.
  LogicalResult emitMmaDot(kiln::DotOp dot, const Mma &m);
  /// dot on Hopper's warpgroup tensor cores: each warpgroup issues
  /// wgmma.mma_async m64nNk16 for its 64 rows, A and B read in place from
  /// their rings through matrix descriptors, then waits for them (the
  /// accumulator is #kiln.mma<version = 3>, laid out as version 2).
  LogicalResult emitWgmmaDot(kiln::DotOp dot, const Mma &m);
  /// One wgmma m64nNk16 with A from registers (four b32 fragments) and B
  /// from shared memory: the next value of accumulator struct `acc`.
  Value wgmmaRegisterA(Value acc, ArrayRef<Value> aFrag, Value descB, int64_t N, Type in, bool transposeB,
                       bool accumulate);
  /// kiln.dot_wait: wgmma.wait_group, then a barrier for `sync`.
  LogicalResult emitDotWait(kiln::DotWaitOp op);
};

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// The conversion pattern of one source op: binds its converted operands,
/// lowers it with `Lower` and replaces it by its results' elements. A
/// lowering that fails has reported why; the op is then replaced by poison
/// and the pass fails after the conversion (one error, not two).
template <typename SourceOp, auto Lower>
class KilnToGpuPattern : public OpConversionPattern<SourceOp> {
public:
  KilnToGpuPattern(const TypeConverter &converter, LoweringState &state)
      : OpConversionPattern<SourceOp>(converter, state.module->getContext()), state(state) {}

  LogicalResult matchAndRewrite(SourceOp op, typename OpConversionPattern<SourceOp>::OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter emitter(rewriter, op, state);
    if (failed(emitter.bindOperands(op, adaptor.getOperands())) || failed((emitter.*Lower)(op)))
      state.failed = true;
    emitter.replace(op);
    return success();
  }

private:
  LoweringState &state;
};

/// Adds the pattern lowering `SourceOp` with `Lower` (a member of Emitter).
template <typename SourceOp, auto Lower>
void addPattern(RewritePatternSet &patterns, const TypeConverter &converter, LoweringState &state) {
  patterns.add<KilnToGpuPattern<SourceOp, Lower>>(converter, state);
}

// One populate function per op family, each defined in its own file.
void populateElementwiseToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateShapeToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateLoadStoreToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateReduceToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateDotToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateConvertLayoutToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &);
void populateControlFlowToGpuPatterns(const TypeConverter &, LoweringState &, RewritePatternSet &,
                                      ConversionTarget &);

} // namespace kiln::gpu_lowering

#endif // KILN_LOWERING_GPUEMITTER_H
