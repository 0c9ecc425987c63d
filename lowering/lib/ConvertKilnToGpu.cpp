//===- ConvertKilnToGpu.cpp - distribute kiln tiles over a CTA's threads --===//
//
// Rewrites each kiln kernel as a gpu.func whose body is scalar code run by
// every thread: a dialect conversion whose type converter turns a tile into
// the elements this thread holds under the tile's layout (see Passes.td),
// with one file of patterns per op family (see GpuEmitter.h). Data movement
// between layouts, general reductions and dot go through one shared-memory
// scratch area after the rings.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "GpuEmitter.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOGPU
#include "kiln/Lowering/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Limits checked before any code is emitted, so that a tile too large for
/// a CTA fails in milliseconds with a message instead of emitting millions
/// of instructions. A thread holds numel / threads elements of a tile whose
/// size divides among the threads, and all of it otherwise (replicated).
constexpr int64_t kMaxElementsPerThread = 1024;
/// The sum over every tile value of the elements a thread holds: a bound on
/// the code emitted (the library's largest kernels stay under 1/10 of it).
constexpr int64_t kMaxEmittedElements = 1 << 18;

LogicalResult checkResources(func::FuncOp f, int threads) {
  int64_t total = 0;
  WalkResult walk = f.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (!tile || !tile.hasStaticShape())
        continue;
      int64_t numel = tile.getNumElements();
      int64_t perThread = numel % threads == 0 ? numel / threads : numel;
      if (perThread > kMaxElementsPerThread) {
        op->emitError("convert-kiln-to-gpu: the tile ")
            << tile << " of " << op->getName() << " would put " << perThread
            << " elements in each of the " << threads << " threads (at most "
            << kMaxElementsPerThread
            << "): use smaller blocks, or blocks whose element count is a multiple of the "
               "thread count";
        return WalkResult::interrupt();
      }
      total += perThread;
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (total > kMaxEmittedElements)
    return f.emitError("convert-kiln-to-gpu: kernel '")
           << f.getName() << "' holds " << total
           << " tile elements per thread over all its values (at most " << kMaxEmittedElements
           << "); use smaller blocks";
  return success();
}

/// Every tile has the layout the layout passes chose, for this many warps.
LogicalResult checkLayouts(func::FuncOp f, int warps) {
  WalkResult walk = f.walk([&](Operation *op) {
    auto check = [&](Value v) {
      auto tile = dyn_cast<RankedTensorType>(v.getType());
      if (!tile)
        return true;
      kiln::LayoutAttr layout = kiln::getLayout(tile);
      if (!layout) {
        op->emitError("convert-kiln-to-gpu: the tile ")
            << tile << " has no layout; run kiln-coalesce (and the other layout passes) first";
        return false;
      }
      if (layout.getNumWarps() != warps) {
        op->emitError("convert-kiln-to-gpu: the layout of ")
            << tile << " is for " << layout.getNumWarps() << " warps, not " << warps;
        return false;
      }
      return true;
    };
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (!check(arg))
            return WalkResult::interrupt();
    for (Value r : op->getResults())
      if (!check(r))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Tiles become the elements a thread holds (see lowerType).
struct GpuTypeConverter : TypeConverter {
  explicit GpuTypeConverter(int threads) {
    addConversion([](Type t) { return t; });
    addConversion([threads](Type t, SmallVectorImpl<Type> &out) -> std::optional<LogicalResult> {
      if (!isa<RankedTensorType, kiln::PtrType, kiln::SharedType, kiln::TensorMapType>(t))
        return std::nullopt;
      kiln::gpu_lowering::lowerType(t, threads, out);
      return success();
    });
  }
};

/// Records the tensor-map arguments of `f` for the runtime: the gpu.func
/// lists them (kiln.tensormap_args: the LLVM translation passes them by
/// value, as __grid_constant__ parameters), and the global kiln_tensormaps
/// holds, for each, how to encode it from the other arguments: its count,
/// then per map {argument, base, rows, cols, stride, box rows, box cols,
/// element type (0 f16, 1 bf16, 2 f32)}.
LogicalResult recordTensorMaps(func::FuncOp f, gpu::GPUFuncOp gpuFunc, gpu::GPUModuleOp module) {
  using namespace kiln::gpu_lowering;
  SmallVector<int32_t> args, table{0};
  for (BlockArgument arg : f.getArguments()) {
    if (!isa<kiln::TensorMapType>(arg.getType()))
      continue;
    auto recipe = f.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kiln::KilnDialect::getTensorMapAttrName());
    auto field = [&](StringRef name) { return recipe ? recipe.getAs<IntegerAttr>(name) : IntegerAttr(); };
    auto box = recipe ? recipe.getAs<DenseI32ArrayAttr>("box") : DenseI32ArrayAttr();
    if (!field("base") || !field("rows") || !field("cols") || !field("stride") || !box || box.size() != 2)
      return f.emitError("convert-kiln-to-gpu: tensor-map argument ")
             << arg.getArgNumber() << " has no complete kiln.tensormap attribute";
    auto ptr = dyn_cast<kiln::PtrType>(f.getArgument(field("base").getInt()).getType());
    Type elem = ptr ? ptr.getPointeeType() : Type();
    if (!ptr || !(elem.isF16() || elem.isBF16() || elem.isF32()))
      return f.emitError("convert-kiln-to-gpu: tensor maps describe f16, bf16 or f32 tensors");
    args.push_back(int32_t(arg.getArgNumber()));
    table[0] += 1;
    table.append({int32_t(arg.getArgNumber()), int32_t(field("base").getInt()), int32_t(field("rows").getInt()),
                  int32_t(field("cols").getInt()), int32_t(field("stride").getInt()), box[0], box[1],
                  elem.isBF16() ? 1 : elem.isF32() ? 2 : 0});
  }
  if (args.empty())
    return success();
  OpBuilder b(module.getContext());
  gpuFunc->setAttr(kTensorMapArgsName, b.getDenseI32ArrayAttr(args));
  b.setInsertionPointToStart(module.getBody());
  auto type = LLVM::LLVMArrayType::get(b.getI32Type(), table.size());
  LLVM::GlobalOp::create(b, f.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::External, kTensorMapsName,
                         DenseIntElementsAttr::get(RankedTensorType::get({int64_t(table.size())}, b.getI32Type()),
                                                   ArrayRef<int32_t>(table)),
                         /*alignment=*/4, /*addrSpace=*/1);
  return success();
}

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

/// The top-level ops of `f` between which ring `alloc` is in use: from the
/// alloc to the first `kiln.async_wait` after its last use (which waits for
/// every copy into it, masked-off ones included, and synchronises the
/// program past its last read), or, for a ring filled by TMA copies alone
/// (each waited for on its mbarrier by the iteration that reads it), to its
/// last use. Uses include the views of its buffers (tiles read in place by
/// products) and the products reading them. Rings used otherwise (mbarrier
/// rings), or not allocated at the top level, live for the whole kernel.
std::pair<int64_t, int64_t> ringLifetime(kiln::LocalAllocOp alloc, Block &top,
                                         const DenseMap<Operation *, int64_t> &index, bool &tmaOnly) {
  tmaOnly = false;
  if (alloc->getBlock() != &top)
    return {0, kForever};
  int64_t last = index.lookup(alloc);
  bool cpAsync = false;
  SmallVector<Value> work{alloc.getResult()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto tma = dyn_cast<kiln::AsyncTmaCopyOp>(user);
      if (v == alloc.getResult() && !isa<kiln::AsyncCopyOp, kiln::LocalLoadOp>(user) &&
          !(tma && tma.getRing() == v && tma.getBarriers() != v))
        return {0, kForever};
      cpAsync |= isa<kiln::AsyncCopyOp>(user);
      Operation *at = top.findAncestorOpInBlock(*user);
      if (!at)
        return {0, kForever};
      last = std::max(last, index.lookup(at));
      // Views of the buffer, and asynchronous products reading it until
      // their kiln.dot_wait (perhaps after the loop that carries them).
      auto dot = dyn_cast<kiln::DotOp>(user);
      if (isa<kiln::LocalLoadOp, kiln::TransOp, kiln::ConvertLayoutOp>(user) || (dot && dot.getAsync()))
        llvm::append_range(work, user->getResults());
      else if (isa<scf::YieldOp>(user) && v.getDefiningOp<kiln::DotOp>())
        work.push_back(user->getParentOp()->getResult(use.getOperandNumber()));
    }
  }
  if (!cpAsync) {
    tmaOnly = true;
    return {index.lookup(alloc), last};
  }
  for (Operation *op = top.findAncestorOpInBlock(*alloc)->getNextNode(); op; op = op->getNextNode())
    if (index.lookup(op) > last && isa<kiln::AsyncWaitOp>(op))
      return {index.lookup(alloc), index.lookup(op)};
  return {index.lookup(alloc), kForever};
}

/// Places the rings of `f` in shared memory, `align`-aligned: rings whose
/// lifetimes (ringLifetime) do not overlap share bytes, so that a kernel of
/// several pipelined loops (attention's unmasked and diagonal key blocks)
/// needs the largest loop's rings, not their sum. Returns the bytes used.
int64_t allocateRings(func::FuncOp f, int64_t align, DenseMap<Value, int64_t> &offsets, int64_t &lastEnd,
                      int64_t &foreverBytes) {
  Block &top = f.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t i = 0;
  for (Operation &op : top)
    index[&op] = i++;
  struct Placed {
    int64_t offset, bytes, end;
  };
  SmallVector<Placed> live;
  int64_t used = 0;
  // mbarrier rings (a few bytes, live for the whole kernel) first, so that
  // the bytes after them can be reused once the others are dead.
  // A ring filled by TMA alone has no kiln.async_wait that synchronises the
  // program past its last read: no other ring shares its bytes (only the
  // epilogue's scratch area, after the barrier convertKernel adds).
  struct Ring {
    kiln::LocalAllocOp alloc;
    int64_t start, end;
    bool tmaOnly;
  };
  SmallVector<Ring> rings;
  f.walk([&](kiln::LocalAllocOp alloc) {
    Ring r{alloc, 0, 0, false};
    std::tie(r.start, r.end) = ringLifetime(alloc, top, index, r.tmaOnly);
    rings.push_back(r);
  });
  std::stable_partition(rings.begin(), rings.end(), [](Ring &r) {
    return r.end == kForever && cast<kiln::SharedType>(r.alloc.getType()).getElementType().isInteger(64);
  });
  for (const Ring &r : rings) {
    kiln::LocalAllocOp alloc = r.alloc;
    auto ring = cast<kiln::SharedType>(alloc.getType());
    int64_t bytes = kiln::gpu_lowering::Emitter::ringStride(ring) * ring.getStages();
    int64_t start = r.start, end = r.tmaOnly ? kForever - 1 : r.end;
    llvm::erase_if(live, [&](const Placed &p) { return p.end < start; });
    llvm::sort(live, [](const Placed &a, const Placed &b) { return a.offset < b.offset; });
    int64_t offset = 0; // the first gap that fits
    for (const Placed &p : live) {
      if (int64_t(llvm::alignTo(offset, align)) + bytes <= p.offset)
        break;
      offset = std::max(offset, p.offset + p.bytes);
    }
    offset = llvm::alignTo(offset, align);
    offsets[alloc] = offset;
    live.push_back({offset, bytes, end});
    used = std::max(used, offset + bytes);
    if (r.end == kForever)
      foreverBytes = std::max(foreverBytes, offset + bytes);
    else
      lastEnd = std::max(lastEnd, r.end);
  }
  return used;
}

/// Moves kernel `f` into a gpu.func of its own gpu.module and converts its
/// body with the patterns of every op family.
LogicalResult convertKernel(func::FuncOp f, int threads) {
  using namespace kiln::gpu_lowering;
  MLIRContext *ctx = f.getContext();
  Location loc = f.getLoc();
  OpBuilder b(f);
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, (f.getName() + "_module").str());
  b.setInsertionPointToStart(gpuModule.getBody());
  GpuTypeConverter converter(threads);
  SmallVector<Type> args;
  for (Type t : f.getArgumentTypes())
    args.push_back(converter.convertType(t));
  auto gpuFunc = gpu::GPUFuncOp::create(b, loc, f.getName(), FunctionType::get(ctx, args, {}));
  gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kiln::ProducerOp producer;
  for (auto p : f.getBody().front().getOps<kiln::ProducerOp>()) {
    if (producer)
      return p.emitOpError("a kernel has at most one kiln.producer");
    producer = p;
  }
  int producerThreads = producer ? int(producer.getWarps()) * 32 : 0;
  auto virtualGrid = f->getAttrOfType<IntegerAttr>(kiln::KilnDialect::getVirtualGridAttrName());
  // A kernel that waits on the grids before it is launched as their
  // programmatic dependent (kiln_dependent_launch).
  bool dependent = f.walk([](kiln::GridDependencyWaitOp) { return WalkResult::interrupt(); }).wasInterrupted();
  // A kernel that exchanges values in a cluster runs in clusters of that
  // many programs along x (the verifier checked they all name one size).
  uint32_t clusterSize = kiln::clusterSizeOf(f);
  if (clusterSize && (virtualGrid || producer))
    return f.emitError("cluster ops (kiln.cluster_reduce, kiln.cluster_gather) in a persistent kernel or one with "
                       "producer warps are not supported");
  if (clusterSize)
    gpuFunc->setAttr(kClusterDimName, b.getI32IntegerAttr(int32_t(clusterSize)));
  if (threads + producerThreads > 1024)
    return f.emitError("kernel needs ") << threads + producerThreads << " threads per program (limit 1024)";
  gpuFunc.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(ctx, {threads + producerThreads, 1, 1}));

  LoweringState state(threads, gpuModule);
  state.producerThreads = producerThreads;
  state.axis.emplace(f);
  // wgmma reads its operands from the rings through the async proxy, and
  // their 128-byte swizzle repeats every 1024 bytes.
  f.walk([&](kiln::DotOp dot) {
    auto mma = dyn_cast_or_null<kiln::MmaLayoutAttr>(kiln::getLayout(dot.getType()));
    state.asyncProxyReads |= mma && mma.getVersion() == 3;
  });
  f.walk([&](kiln::AsyncTmaCopyOp) { state.tmaCopies = true; });
  if (failed(recordTensorMaps(f, gpuFunc, gpuModule)))
    return failure();
  bool align1024 = state.asyncProxyReads || state.tmaCopies;
  // Rings first, then the scratch area.
  int64_t lastEnd = -1, foreverBytes = 0;
  int64_t offset = allocateRings(f, align1024 ? 1024 : 16, state.ringOffsets, lastEnd, foreverBytes);
  if (align1024)
    offset = llvm::alignTo(offset, 1024);
  state.scratchBase = state.smemBytes = offset;
  // Once every ring is dead (the last one's kiln.async_wait passed), the
  // epilogue's exchanges reuse the rings' bytes, after a barrier that waits
  // for every warp's last reads of them (ldmatrix, or another warpgroup's
  // wgmma). Not with producer warps or a tile loop, whose rings stay live.
  Block &top = f.getBody().front();
  if (!producer && !virtualGrid && lastEnd >= 0 && lastEnd < int64_t(top.getOperations().size()) - 2) {
    Operation *last = &*std::next(top.begin(), lastEnd);
    b.setInsertionPointAfter(last);
    // A kiln.async_wait that ends a ring's lifetime has that barrier already.
    if (!isa<kiln::AsyncWaitOp>(last))
      gpu::BarrierOp::create(b, loc);
    for (Operation *op = last->getNextNode(); op; op = op->getNextNode())
      state.afterRings.insert(op);
    state.deadRingsBase = llvm::alignTo(foreverBytes, align1024 ? 1024 : 16);
  }

  // The kernel's body becomes the gpu.func's, after the thread's coordinates.
  Block &entry = gpuFunc.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  state.tid = state.entryTid = arith::IndexCastOp::create(b, loc, b.getI32Type(), t);
  Value w = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
  state.lane = arith::RemUIOp::create(b, loc, state.tid, w);
  state.warp = arith::DivUIOp::create(b, loc, state.tid, w);
  Block &body = f.getBody().front();
  for (auto [from, to] : llvm::zip(body.getArguments(), entry.getArguments()))
    state.values[from] = {to};
  entry.getOperations().splice(entry.end(), body.getOperations());
  for (auto [from, to] : llvm::zip(body.getArguments(), entry.getArguments()))
    from.replaceAllUsesWith(to);
  // Producer warps run the kiln.producer's body; the program's warps run
  // everything after it.
  if (producer) {
    b.setInsertionPoint(producer);
    Value isProducer = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, state.tid,
                                             arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(threads)));
    auto branch = scf::IfOp::create(b, loc, TypeRange{}, isProducer, /*withElseRegion=*/true);
    branch->setAttr(kProducerBranchName, UnitAttr::get(ctx));
    Block *then = branch.thenBlock(), *otherwise = branch.elseBlock();
    then->getOperations().splice(then->begin(), producer.getBody().front().getOperations());
    otherwise->getOperations().splice(otherwise->begin(), entry.getOperations(),
                                      std::next(producer->getIterator()), std::prev(entry.end()));
    producer->erase();
    // A producer warpgroup next to several consumer warpgroups gives them
    // its registers. Each of the four SM sub-partitions holds 16384
    // registers and one warp of every warpgroup: the kernel starts at what
    // its warps allow (.maxnreg), the producer drops to 40 and the
    // consumers take the rest.
    if (producerThreads == 128 && threads % 128 == 0 && threads >= 256) {
      int warpsPerPartition = (threads + producerThreads) / 128;
      int start = std::min(255, 16384 / (32 * warpsPerPartition)) / 8 * 8;
      int consumers = std::min(256, (16384 - 40 * 32) / (32 * (warpsPerPartition - 1))) / 8 * 8;
      gpuFunc->setAttr(kMaxRegistersName, b.getI32IntegerAttr(start));
      b.setInsertionPointToStart(then);
      NVVM::SetMaxRegisterOp::create(b, loc, 40, NVVM::SetMaxRegisterAction::decrease);
      b.setInsertionPointToStart(otherwise);
      NVVM::SetMaxRegisterOp::create(b, loc, consumers, NVVM::SetMaxRegisterAction::increase);
    }
    // A persistent kernel's consumers run one loop over tiles. Their thread
    // coordinates are read afresh in each tile (a read the compiler may not
    // move): hoisted out of the loop, every per-thread offset computed from
    // them would stay live across all tiles, in registers the products need.
    scf::ForOp tiles;
    for (auto loop : otherwise->getOps<scf::ForOp>())
      tiles = loop;
    if (virtualGrid && tiles) {
      b.setInsertionPointToStart(tiles.getBody());
      auto read = LLVM::InlineAsmOp::create(b, loc, b.getI32Type(), ValueRange{}, "mov.u32 $0, %tid.x;", "=r",
                                            /*has_side_effects=*/true, /*is_align_stack=*/false,
                                            LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                                            ArrayAttr());
      state.tid = read.getResult(0);
      Value w = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
      state.lane = arith::RemUIOp::create(b, loc, state.tid, w);
      state.warp = arith::DivUIOp::create(b, loc, state.tid, w);
    }
  }

  ConversionTarget target(*ctx);
  target.addLegalDialect<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect>();
  target.addIllegalDialect<kiln::KilnDialect>();
  target.addIllegalOp<func::ReturnOp>();
  // arith and math on scalars stay as they are.
  target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
      [&](Operation *op) { return converter.isLegal(op); });
  RewritePatternSet patterns(ctx);
  populateElementwiseToGpuPatterns(converter, state, patterns);
  populateShapeToGpuPatterns(converter, state, patterns);
  populateLoadStoreToGpuPatterns(converter, state, patterns);
  populateReduceToGpuPatterns(converter, state, patterns);
  populateDotToGpuPatterns(converter, state, patterns);
  populateConvertLayoutToGpuPatterns(converter, state, patterns);
  populateControlFlowToGpuPatterns(converter, state, patterns, target);
  ConversionConfig config;
  // Source ops are lowered as written, never folded first.
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (failed(applyPartialConversion(gpuFunc, target, std::move(patterns), config)) || state.failed)
    return failure();
  f.erase();

  if (state.smemBytes > kMaxSmem)
    return gpuFunc.emitError("kernel needs ")
           << state.smemBytes << " bytes of shared memory (limit " << kMaxSmem
           << "); use smaller blocks or fewer stages";
  auto global = [&](const char *name, int32_t value) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(gpuModule.getBody());
    LLVM::GlobalOp::create(b, loc, b.getI32Type(), /*isConstant=*/true, LLVM::Linkage::External, name,
                           b.getI32IntegerAttr(value), /*alignment=*/4, /*addrSpace=*/1);
  };
  if (producerThreads)
    global(kThreadsName, threads + producerThreads);
  if (virtualGrid)
    global(kVirtualGridName, int32_t(virtualGrid.getInt()));
  if (dependent)
    global(kDependentLaunchName, 1);
  if (clusterSize)
    global(kClusterSizeName, int32_t(clusterSize));
  if (state.smemBytes > 0) {
    b.setInsertionPointToStart(gpuModule.getBody());
    // extern __shared__, sized at launch from kiln_smem_bytes.
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/false, LLVM::Linkage::External, kSmemName,
                           Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
    LLVM::GlobalOp::create(b, loc, b.getI32Type(), /*isConstant=*/true, LLVM::Linkage::External,
                           kSmemBytesName, b.getI32IntegerAttr(int32_t(state.smemBytes)),
                           /*alignment=*/4, /*addrSpace=*/1);
  }
  return success();
}

struct ConvertKilnToGpuPass : kiln::impl::ConvertKilnToGpuBase<ConvertKilnToGpuPass> {
  using ConvertKilnToGpuBase::ConvertKilnToGpuBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (numWarps < 1 || numWarps > 32) {
      module.emitError("num-warps must be in [1, 32], got ") << static_cast<int>(numWarps);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> kernels;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kiln::KilnDialect::getKernelAttrName()))
        kernels.push_back(f);
    if (kernels.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    for (func::FuncOp f : kernels)
      if (failed(checkLayouts(f, numWarps)) || failed(checkResources(f, numWarps * 32)))
        return signalPassFailure();
    // Programmatic dependent launch needs sm_90: before it, kernels are
    // serialised on the stream and the ops have nothing to do.
    std::string target = arch;
    if (target.rfind("sm_", 0) != 0 || std::atoi(target.c_str() + 3) < 90) {
      SmallVector<Operation *> dependency;
      for (func::FuncOp f : kernels)
        f.walk([&](Operation *op) {
          if (isa<kiln::GridDependencyWaitOp, kiln::LaunchDependentsOp>(op))
            dependency.push_back(op);
        });
      for (Operation *op : dependency)
        op->erase();
      // Thread-block clusters need sm_90 too, and have no substitute.
      for (func::FuncOp f : kernels) {
        auto cluster = f.walk([](Operation *op) {
          if (!isa<kiln::ClusterReduceOp, kiln::ClusterGatherOp>(op))
            return WalkResult::advance();
          op->emitError() << op->getName() << " needs thread-block clusters (sm_90 or newer)";
          return WalkResult::interrupt();
        });
        if (cluster.wasInterrupted())
          return signalPassFailure();
      }
    }
    for (func::FuncOp f : kernels)
      if (failed(convertKernel(f, numWarps * 32)))
        return signalPassFailure();
  }
};

} // namespace
