//===- KilnOps.td - kiln operations ------------------------*- tablegen -*-===//
#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "kiln/Dialect/KilnDialect.td"
include "kiln/Dialect/KilnTypes.td"
include "kiln/Dialect/KilnAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Kiln_GridAxis : ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>;

//===----------------------------------------------------------------------===//
// Grid
//===----------------------------------------------------------------------===//

def Kiln_ProgramIdOp : Kiln_Op<"program_id", [Pure]> {
  let summary = "index of this program along a grid axis";
  let description = [{
    Returns the index (0-based) of the running program along grid axis 0, 1
    or 2. Every program of the grid runs the same kernel body.

    ```mlir
    %row = kiln.program_id 0 : i32
    ```
  }];
  let arguments = (ins Kiln_GridAxis:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Kiln_NumProgramsOp : Kiln_Op<"num_programs", [Pure]> {
  let summary = "number of programs along a grid axis";
  let description = [{
    ```mlir
    %n = kiln.num_programs 1 : i32
    ```
  }];
  let arguments = (ins Kiln_GridAxis:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Tile construction and shape manipulation
//===----------------------------------------------------------------------===//

def Kiln_MakeRangeOp : Kiln_Op<"make_range", [Pure]> {
  let summary = "1-D tile holding start, start+1, ..., end-1";
  let description = [{
    ```mlir
    %cols = kiln.make_range 0 to 128 : tensor<128xi32>
    ```
    The result length must equal `end - start`.
  }];
  let arguments = (ins I32Attr:$start, I32Attr:$end);
  let results = (outs Kiln_I32Tile:$result);
  let assemblyFormat = "$start `to` $end attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_SplatOp : Kiln_Op<"splat", [Pure,
    TypesMatchWith<"result element type matches the scalar", "result", "src",
                   "::llvm::cast<::mlir::RankedTensorType>($_self).getElementType()">]> {
  let summary = "tile with every element equal to one scalar";
  let description = [{
    ```mlir
    %t = kiln.splat %x : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Kiln_Elem:$src);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure]> {
  let summary = "stretch size-1 dimensions of a tile";
  let description = [{
    Source and result have the same rank and element type; every source
    dimension equals the result's or is 1.

    ```mlir
    %b = kiln.broadcast %a : tensor<64x1xf32> -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Kiln_Tile:$src);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ExpandDimsOp : Kiln_Op<"expand_dims", [Pure]> {
  let summary = "insert a size-1 dimension";
  let description = [{
    ```mlir
    %c = kiln.expand_dims %r {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    ```
  }];
  let arguments = (ins Kiln_Tile:$src, I32Attr:$axis);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure]> {
  let summary = "reinterpret a tile's shape, keeping row-major element order";
  let description = [{
    ```mlir
    %f = kiln.reshape %t : tensor<8x16xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Kiln_Tile:$src);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransOp : Kiln_Op<"trans", [Pure]> {
  let summary = "transpose a 2-D tile";
  let description = [{
    `result[j, i] = src[i, j]`. As the second operand of `kiln.dot` it is
    free on tensor cores: the tile is staged in shared memory as it is and
    read in the operand's order, so `dot(q, trans(k))` with `k` loaded
    row by row is the usual way to multiply by a transposed matrix.

    ```mlir
    %kt = kiln.trans %k : tensor<64x32xf16> -> tensor<32x64xf16>
    ```
  }];
  let arguments = (ins Kiln_Tile:$src);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConvertLayoutOp : Kiln_Op<"convert_layout", [Pure, SameOperandsAndResultShape,
    SameOperandsAndResultElementType]> {
  let summary = "move a tile from one GPU layout to another";
  let description = [{
    The same tile, held as the result's layout says (see the layout
    attributes). Inserted by the layout passes wherever a value's producer
    and a user want different layouts; the GPU lowering moves the elements
    between threads (through shared memory, or by recomputing index
    arithmetic in the new layout) or, between compatible layouts (a
    tensor-core accumulator whose warps hold whole rows and the A operand of
    the next product), moves nothing.

    ```mlir
    %b = kiln.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
    ```
  }];
  let arguments = (ins Kiln_Tile:$src);
  let results = (outs Kiln_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def Kiln_AddPtrOp : Kiln_Op<"addptr", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "offset pointers by a number of elements";
  let description = [{
    Element-wise `ptr + offset * sizeof(pointee)`. The offset has the shape
    of the pointer operand (a scalar for a scalar pointer).

    ```mlir
    %p = kiln.addptr %base, %offs : tensor<128x!kiln.ptr<f16>>, tensor<128xi32>
    ```
  }];
  let arguments = (ins Kiln_PtrLike:$ptr, Kiln_IntLike:$offset);
  let results = (outs Kiln_PtrLike:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_LoadOp : Kiln_Op<"load", [
    TypesMatchWith<"result holds the pointees", "ptr", "result",
                   "::kiln::getPointeeType($_self)">,
    OptionalTypesMatchWith<"mask has the pointer shape", "ptr", "mask",
                   "::kiln::getMaskType($_self)">,
    OptionalTypesMatchWith<"fill value matches the result", "ptr", "other",
                   "::kiln::getPointeeType($_self)">,
    AttrSizedOperandSegments]> {
  let summary = "masked load from global memory";
  let description = [{
    Loads the element behind every pointer. Where the optional mask is false
    nothing is read and the result holds `other` (zero if absent).

    ```mlir
    %v = kiln.load %p, %m, %neg_inf : tensor<128x!kiln.ptr<f32>>
    ```
  }];
  let arguments = (ins Arg<Kiln_PtrLike, "", [MemRead]>:$ptr,
                       Optional<Kiln_MaskLike>:$mask,
                       Optional<Kiln_NumberLike>:$other);
  let results = (outs Kiln_NumberLike:$result);
  let assemblyFormat = "$ptr (`,` $mask^)? (`,` $other^)? attr-dict `:` type($ptr)";
  let hasVerifier = 1;
}

def Kiln_StoreOp : Kiln_Op<"store", [
    TypesMatchWith<"value holds the pointees", "ptr", "value",
                   "::kiln::getPointeeType($_self)">,
    OptionalTypesMatchWith<"mask has the pointer shape", "ptr", "mask",
                   "::kiln::getMaskType($_self)">]> {
  let summary = "masked store to global memory";
  let description = [{
    Stores every element of `value` behind the matching pointer, skipping
    elements whose mask bit is false.

    ```mlir
    kiln.store %p, %v, %m : tensor<128x!kiln.ptr<f16>>
    ```
  }];
  let arguments = (ins Arg<Kiln_PtrLike, "", [MemWrite]>:$ptr,
                       Kiln_NumberLike:$value,
                       Optional<Kiln_MaskLike>:$mask);
  let assemblyFormat = "$ptr `,` $value (`,` $mask^)? attr-dict `:` type($ptr)";
}

def Kiln_PrefetchOp : Kiln_Op<"prefetch", [
    OptionalTypesMatchWith<"mask has the pointer shape", "ptr", "mask",
                   "::kiln::getMaskType($_self)">]> {
  let summary = "bring the lines behind pointers into L2 (a hint)";
  let description = [{
    Asks the memory system to bring the cache line holding each pointee
    (where the optional mask is true) into the GPU's L2 cache, without
    waiting for it and without a result: a later load of that line, by any
    program or by a later kernel, finds it in L2. It changes no value the
    kernel computes; backends without such a hint drop it. A decode step
    uses it to stream the weights of the kernels after this one while this
    one works.

    ```mlir
    kiln.prefetch %p, %m : tensor<128x!kiln.ptr<f16>>
    ```
  }];
  // No declared memory effects: the op must survive dead-code elimination.
  let arguments = (ins Kiln_PtrLike:$ptr, Optional<Kiln_MaskLike>:$mask);
  let assemblyFormat = "$ptr (`,` $mask^)? attr-dict `:` type($ptr)";
}

def Kiln_AtomicAddOp : Kiln_Op<"atomic_add"> {
  let summary = "add to an i32 in global memory, once per program";
  let description = [{
    Adds `value` to the i32 behind the scalar pointer `ptr` once for the
    whole program (not once per thread) and returns the previous value. The
    addition is an acquire-release operation at GPU scope: every store the
    program made before it is visible to a program whose own `atomic_add`
    on the same counter returns a larger value, and the loads after it see
    those stores. This is what "the last program to finish combines the
    partial results" needs.

    ```mlir
    %old = kiln.atomic_add %counter, %one : !kiln.ptr<i32>
    ```
  }];
  let arguments = (ins Arg<Kiln_PtrType, "", [MemRead, MemWrite]>:$ptr, I32:$value);
  let results = (outs I32:$result);
  let assemblyFormat = "$ptr `,` $value attr-dict `:` qualified(type($ptr))";
  let hasVerifier = 1;
}

def Kiln_AtomicAccumulateOp : Kiln_Op<"atomic_accumulate", [
    TypesMatchWith<"value holds the pointees", "ptr", "value",
                   "::kiln::getPointeeType($_self)">,
    OptionalTypesMatchWith<"mask has the pointer shape", "ptr", "mask",
                   "::kiln::getMaskType($_self)">]> {
  let summary = "add f32 values to global memory, element-wise and atomically";
  let description = [{
    Adds each element of `value` to the f32 behind the matching pointer
    (where the optional mask is true), as one atomic read-modify-write per
    element with no result: programs adding to the same location never lose
    an addition, in whatever order they run. The additions are relaxed: to
    read the sums, a program orders them with `kiln.atomic_add` on a counter
    (every program adds, then counts; the last to count reads). The order of
    the additions, and so the rounding of the sums, may differ from run to
    run. A split reduction (a product split along K over programs) adds its
    partial results this way instead of writing them out for a second pass.

    ```mlir
    kiln.atomic_accumulate %p, %v, %m : tensor<256x!kiln.ptr<f32>>
    ```
  }];
  let arguments = (ins Arg<Kiln_PtrLike, "", [MemRead, MemWrite]>:$ptr,
                       Kiln_NumberLike:$value,
                       Optional<Kiln_MaskLike>:$mask);
  let assemblyFormat = "$ptr `,` $value (`,` $mask^)? attr-dict `:` type($ptr)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shared-memory rings and asynchronous copies (GPU; made by
// -kiln-pipeline-loads, not by the front end)
//===----------------------------------------------------------------------===//

def Kiln_LocalAllocOp : Kiln_Op<"local_alloc"> {
  let summary = "reserve a ring of tile buffers in shared memory";
  let description = [{
    The buffers live for the whole kernel; their contents are undefined until
    a `kiln.async_copy` fills them.

    ```mlir
    %ring = kiln.local_alloc : !kiln.shared<3x64x32xf16>
    ```
  }];
  let results = (outs Res<Kiln_SharedType, "", [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_AsyncCopyOp : Kiln_Op<"async_copy", [
    AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask has the pointer shape", "ptr", "mask",
                   "::kiln::getMaskType($_self)">,
    OptionalTypesMatchWith<"fill value matches the pointees", "ptr", "other",
                   "::kiln::getPointeeType($_self)">]> {
  let summary = "start copying a tile from global memory into a ring buffer";
  let description = [{
    Starts loading the element behind every pointer into buffer `stage` of
    `ring` (`other`, or zero, where the mask is false), without waiting for
    the data. Copies become part of the group that the next
    `kiln.async_commit` closes; `kiln.async_wait` waits for them.

    ```mlir
    kiln.async_copy %p, %ring[%stage], %m : tensor<64x32x!kiln.ptr<f16>>, !kiln.shared<3x64x32xf16>
    ```
  }];
  let arguments = (ins Arg<Kiln_PtrTile, "", [MemRead]>:$ptr,
                       Arg<Kiln_SharedType, "", [MemWrite]>:$ring,
                       I32:$stage,
                       Optional<Kiln_MaskTile>:$mask,
                       Optional<Kiln_NumberTile>:$other);
  let assemblyFormat = [{
    $ptr `,` $ring `[` $stage `]` (`,` $mask^)? (`,` $other^)? attr-dict `:` type($ptr) `,` type($ring)
  }];
  let hasVerifier = 1;
}

def Kiln_AsyncCommitOp : Kiln_Op<"async_commit"> {
  let summary = "close the current group of asynchronous copies";
  let assemblyFormat = "attr-dict";
}

def Kiln_AsyncWaitOp : Kiln_Op<"async_wait"> {
  let summary = "wait for all but the newest groups of copies, then synchronise the program";
  let description = [{
    Waits until at most `pending` committed groups of this thread's copies are
    still in flight, then synchronises the program's threads, so that every
    completed copy is visible to every thread.

    ```mlir
    kiln.async_wait {pending = 1 : i32}
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative]>:$pending);
  let assemblyFormat = "attr-dict";
}

def Kiln_LocalLoadOp : Kiln_Op<"local_load"> {
  let summary = "read one ring buffer as a tile";
  let description = [{
    ```mlir
    %a = kiln.local_load %ring[%stage] : !kiln.shared<3x64x32xf16> -> tensor<64x32xf16>
    ```
    The result has the buffer's shape and element type; on a GPU its layout
    is `#kiln.shared` when tensor-core products read it in place.
  }];
  let arguments = (ins Arg<Kiln_SharedType, "", [MemRead]>:$ring, I32:$stage);
  let results = (outs Kiln_NumberTile:$result);
  let assemblyFormat = "$ring `[` $stage `]` attr-dict `:` type($ring) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_BarrierOp : Kiln_Op<"barrier"> {
  let summary = "synchronise the program's threads";
  let assemblyFormat = "attr-dict";
}

// Programmatic dependent launch: a kernel that waits on the grids before it
// may be launched while they still run, so that its prologue (its launch,
// loads of data no earlier kernel writes) overlaps their tail.

def Kiln_GridDependencyWaitOp : Kiln_Op<"grid_dependency_wait"> {
  let summary = "wait until the kernels launched before this one have completed";
  let description = [{
    Blocks until every kernel this launch depends on (the one before it on
    the stream) has completed and its memory operations are visible. A
    kernel containing this op is launched as a programmatic dependent launch:
    its programs may start before the previous kernel ends, so every program
    must execute this op before it reads anything an earlier kernel writes
    and before any store. Loads before it may only read data that no kernel
    of the stream writes (weights, biases).
  }];
  let assemblyFormat = "attr-dict";
}

def Kiln_LaunchDependentsOp : Kiln_Op<"launch_dependents"> {
  let summary = "allow the next kernel on the stream to start launching";
  let description = [{
    Once every program of this kernel has executed it (or exited), the next
    kernel, if it waits with `kiln.grid_dependency_wait`, may be launched:
    its programs run their prologue while this kernel finishes. It says
    nothing about this kernel's stores: the next kernel's wait still waits
    for this kernel to complete.
  }];
  let assemblyFormat = "attr-dict";
}

// Hopper's Tensor Memory Accelerator: bulk tensor copies that complete on
// shared-memory barriers (mbarrier). A ring of barriers is a
// `!kiln.shared<N x 1 x i64>`: barrier i is buffer i.

def Kiln_MBarrierInitOp : Kiln_Op<"mbarrier_init"> {
  let summary = "initialise a ring of shared-memory barriers";
  let description = [{
    Gives every barrier of `barriers` the expected arrival count `arrivals`
    (one thread initialises them), makes the initialisation visible to the
    async proxy and synchronises the program.

    ```mlir
    kiln.mbarrier_init %bars {arrivals = 1 : i32} : !kiln.shared<3x1xi64>
    ```
  }];
  let arguments = (ins Arg<Kiln_SharedType, "", [MemWrite]>:$barriers,
                       ConfinedAttr<I32Attr, [IntPositive]>:$arrivals);
  let assemblyFormat = "$barriers attr-dict `:` type($barriers)";
  let hasVerifier = 1;
}

def Kiln_MBarrierArriveOp : Kiln_Op<"mbarrier_arrive"> {
  let summary = "one arrival on a shared-memory barrier";
  let description = [{
    One thread of the program arrives on barrier `index` of `barriers`
    (where `pred` holds, when given). With `per_warp`, one thread of every
    warp arrives, after the warp's earlier work (a barrier that counts one
    arrival per warp: consumers saying they are done with a buffer).

    ```mlir
    kiln.mbarrier_arrive %bars[%i] : !kiln.shared<3x1xi64>
    kiln.mbarrier_arrive %empty[%i] if %p {per_warp} : !kiln.shared<3x1xi64>
    ```
  }];
  let arguments = (ins Arg<Kiln_SharedType, "", [MemWrite]>:$barriers, I32:$index,
                       Optional<I1>:$pred, UnitAttr:$per_warp);
  let assemblyFormat = "$barriers `[` $index `]` (`if` $pred^)? attr-dict `:` type($barriers)";
  let hasVerifier = 1;
}

def Kiln_MBarrierWaitOp : Kiln_Op<"mbarrier_wait"> {
  let summary = "wait for a phase of a shared-memory barrier to complete";
  let description = [{
    Every thread waits until the phase of barrier `index` whose parity is
    `phase` (0 or 1) has completed: all its arrivals happened and all the
    bytes announced to it arrived. The data those copies wrote is then
    visible to the waiting thread.

    ```mlir
    kiln.mbarrier_wait %bars[%i], %phase : !kiln.shared<3x1xi64>
    ```
  }];
  let arguments = (ins Arg<Kiln_SharedType, "", [MemRead, MemWrite]>:$barriers, I32:$index,
                       I32:$phase);
  let assemblyFormat = "$barriers `[` $index `]` `,` $phase attr-dict `:` type($barriers)";
  let hasVerifier = 1;
}

def Kiln_AsyncTmaCopyOp : Kiln_Op<"async_tma_copy"> {
  let summary = "start a TMA copy of a tile into a ring buffer";
  let description = [{
    One thread of the program announces the tile's bytes to barrier
    `barrier` of `barriers` and starts bulk tensor copies (one per 64-column
    panel of 16-bit elements) of the tile whose first element is at
    (`row`, `col`) of the tensor `map` describes, into buffer `stage` of
    `ring`, in the 128-byte swizzled layout the tensor cores read. Elements
    outside the tensor's extents are zero. The barrier's phase completes
    when the bytes have landed. With `pred`, only where it holds.

    ```mlir
    kiln.async_tma_copy %map[%row, %col], %ring[%s], %bars[%s]
        : !kiln.shared<3x128x64xf16>, !kiln.shared<3x1xi64>
    ```
  }];
  let arguments = (ins Kiln_TensorMapType:$map, I32:$row, I32:$col,
                       Arg<Kiln_SharedType, "", [MemWrite]>:$ring, I32:$stage,
                       Arg<Kiln_SharedType, "", [MemWrite]>:$barriers, I32:$barrier,
                       Optional<I1>:$pred);
  let assemblyFormat = [{
    $map `[` $row `,` $col `]` `,` $ring `[` $stage `]` `,` $barriers `[` $barrier `]`
    (`if` $pred^)? attr-dict
    `:` type($ring) `,` type($barriers)
  }];
  let hasVerifier = 1;
}

def Kiln_TmaStoreOp : Kiln_Op<"tma_store"> {
  let summary = "store a tile with the Tensor Memory Accelerator";
  let description = [{
    Stores `value` as the tile whose first element is (`row`, `col`) of the
    tensor `map` describes: the program's threads write it into shared
    memory in the 128-byte swizzled layout (each 128 bytes of a row a panel
    of its own), and one thread copies it out with a bulk tensor copy per
    panel. Elements outside the tensor's extents are not written, which is
    the mask of the store it replaces. The copy is asynchronous: its shared
    memory is reused only once the copy has read it, and the kernel ends
    only once it has completed. Nothing after it in the kernel may read what
    it writes.

    ```mlir
    kiln.tma_store %acc, %map[%row, %col] : tensor<128x128xf16, #mma>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value,
                       Arg<Kiln_TensorMapType, "", [MemWrite]>:$map, I32:$row, I32:$col);
  let assemblyFormat = "$value `,` $map `[` $row `,` $col `]` attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Kiln_ProducerOp : Kiln_Op<"producer", [SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "code that runs on warps of its own, beside the program's";
  let description = [{
    Warp specialisation. The body runs on `warps` extra warps of the
    program (after its `kiln.num_warps` warps, which skip it), concurrently
    with everything after the op, which only the program's own warps run.
    The body works on scalars only (no tiles: they are distributed over the
    program's warps) and talks to the rest of the program through
    shared-memory barriers: a producer waits until a ring buffer is empty,
    fills it with TMA copies and lets the copies complete its "full"
    barrier; the program's warps wait on that barrier, compute, and arrive
    on the buffer's "empty" barrier. It must be at the top level of a
    kernel, and there may be one.

    ```mlir
    kiln.producer warps(1) {
      scf.for %k = %c0 to %K step %c64 : i32 {
        kiln.mbarrier_wait %empty[%s], %phase : !kiln.shared<3x1xi64>
        kiln.async_tma_copy %map[%row, %k], %ring[%s], %full[%s] : ...
        kiln.mbarrier_arrive %full[%s] : !kiln.shared<3x1xi64>
      }
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntPositive]>:$warps);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`warps` `(` $warps `)` $body attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Kiln_DotOp : Kiln_Op<"dot", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "tile matrix product with f32 accumulation";
  let description = [{
    `result = a @ b + acc` for `a: MxK`, `b: KxN`, `acc: MxN` (f32). `a` and
    `b` share one element type: f16, bf16 or f32. On GPUs f16/bf16 map to
    tensor cores. With `tf32`, f32 operands may be rounded to TF32 (10
    mantissa bits, f32 range) so that tensor cores compute the product
    (`wgmma` on sm_90a); without it, or where that does not apply, f32
    products are computed in f32.

    ```mlir
    %c = kiln.dot %a, %b, %acc : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
    ```

    Canonicalization folds `x + dot(a, b, 0)` into `dot(a, b, x)`.

    An `async` product (set by kiln-pipeline-mma for Hopper's wgmma) is
    issued and not waited for: its result may only be the accumulator of
    the next asynchronous product, be yielded by its loop, or go through a
    `kiln.dot_wait`, which says when it is complete.
  }];
  let arguments = (ins Kiln_FloatTile:$a, Kiln_FloatTile:$b, Kiln_FloatTile:$acc, UnitAttr:$async,
                       UnitAttr:$tf32);
  let results = (outs Kiln_FloatTile:$result);
  let assemblyFormat = "$a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `->` type($result)";
  let hasVerifier = 1;
  // x + dot(a, b, 0) is dot(a, b, x): the tensor cores accumulate onto x.
  let hasCanonicalizer = 1;
}

def Kiln_DotWaitOp : Kiln_Op<"dot_wait", [AllTypesMatch<["input", "result"]>]> {
  let summary = "wait for asynchronous products";
  let description = [{
    Waits until at most `pendings` asynchronous products (`kiln.dot` with
    `async`) of this warpgroup are in flight, and returns `input`, which is
    complete when `pendings` is 0. With `sync`, the program's threads then
    synchronise, so that no warpgroup's earlier products still read the
    shared memory that what follows overwrites.

    ```mlir
    %w = kiln.dot_wait %d {pendings = 1 : i32, sync} : tensor<128x256xf32, #mma>
    %r = kiln.dot_wait %acc {pendings = 0 : i32} : tensor<128x256xf32, #mma>
    ```
  }];
  let arguments = (ins Kiln_FloatTile:$input, ConfinedAttr<I32Attr, [IntNonNegative]>:$pendings,
                       UnitAttr:$sync);
  let results = (outs Kiln_FloatTile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_ReduceOp : Kiln_Op<"reduce", [Pure]> {
  let summary = "reduce a tile along one axis";
  let description = [{
    Combines the elements along `axis` with `sum`, `max` or `min`. The result
    drops that axis; reducing a 1-D tile gives a scalar.

    ```mlir
    %m = kiln.reduce max %x axis 1 : tensor<16x128xf32> -> tensor<16xf32>
    %s = kiln.reduce sum %y axis 0 : tensor<128xf32> -> f32
    ```
  }];
  let arguments = (ins Kiln_ReduceKindAttr:$kind, Kiln_NumberTile:$src, I32Attr:$axis);
  let results = (outs Kiln_NumberLike:$result);
  let assemblyFormat = "$kind $src `axis` $axis attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

// Thread-block clusters (Hopper): programs that run at the same time on
// neighbouring multiprocessors and can read each other's shared memory.

def Kiln_ClusterReduceOp : Kiln_Op<"cluster_reduce"> {
  let summary = "combine a scalar over the programs of a cluster";
  let description = [{
    The programs of a kernel containing this op run in clusters of `size`
    programs: `size` consecutive program ids along axis 0 (the grid's x
    must be a multiple of `size`). Each program of a cluster contributes
    `value`; each receives the same combination (`sum`, `max` or `min`, in
    the order of the programs' ranks). Every program of a cluster must
    execute the op the same number of times, in the same order. On the GPU
    the cluster is a thread-block cluster (sm_90 and newer) and the values
    meet in distributed shared memory; on the CPU the cluster's programs run
    on threads of their own.

    ```mlir
    %row_max = kiln.cluster_reduce max %m size 4
    ```
  }];
  let arguments = (ins Kiln_ReduceKindAttr:$kind, F32:$value,
                   ConfinedAttr<I32Attr, [IntMinValue<2>, IntMaxValue<8>]>:$size);
  let results = (outs F32:$result);
  let assemblyFormat = "$kind $value `size` $size attr-dict";
  let hasVerifier = 1;
}

def Kiln_ClusterGatherOp : Kiln_Op<"cluster_gather"> {
  let summary = "every program of a cluster receives every program's values";
  let description = [{
    An all-gather over the programs of a cluster (clusters as for
    `kiln.cluster_reduce`, of the same size in one kernel): each program
    contributes its `values` (f32 scalars and 1-D f32 tiles) and each
    receives, for each of them, a tile with one more leading dimension of
    `size`, row r holding the value of the program of rank r. All the
    values meet in one exchange, so a merge that needs several of them
    (a running max, sum and output) waits on the cluster once. Every
    program of a cluster must execute the op the same number of times.

    ```mlir
    %ms, %accs = kiln.cluster_gather %m, %acc size 4 : f32, tensor<64xf32> -> tensor<4xf32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyTypeOf<[F32, Kiln_TileOf<[F32]>]>>:$values,
                   ConfinedAttr<I32Attr, [IntMinValue<2>, IntMaxValue<8>]>:$size);
  let results = (outs Variadic<Kiln_TileOf<[F32]>>:$results);
  let assemblyFormat = "$values `size` $size attr-dict `:` type($values) `->` type($results)";
  let hasVerifier = 1;
}

def Kiln_ArgMaxOp : Kiln_Op<"argmax", [Pure]> {
  let summary = "index of the largest element along one axis";
  let description = [{
    Returns the i32 index of the first maximum along `axis`.

    ```mlir
    %i = kiln.argmax %logits axis 0 : tensor<1024xf32> -> i32
    ```
  }];
  let arguments = (ins Kiln_NumberTile:$src, I32Attr:$axis);
  let results = (outs AnyTypeOf<[I32, Kiln_I32Tile]>:$result);
  let assemblyFormat = "$src `axis` $axis attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure]> {
  let summary = "element type conversion";
  let description = [{
    Converts between numeric element types (float widths, float <-> signed
    integer, integer widths with sign extension, i1 -> 0/1). Shape unchanged.

    ```mlir
    %h = kiln.cast %x : tensor<128xf32> to tensor<128xf16>
    ```
  }];
  let arguments = (ins Kiln_NumberLike:$src);
  let results = (outs Kiln_NumberLike:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SelectOp : Kiln_Op<"select", [Pure, AllTypesMatch<["true_value", "false_value", "result"]>,
    TypesMatchWith<"condition has the value shape", "result", "condition",
                   "::kiln::getMaskType($_self)">]> {
  let summary = "element-wise choice between two tiles";
  let description = [{
    ```mlir
    %r = kiln.select %m, %a, %b : tensor<128xf32>
    ```
  }];
  let arguments = (ins Kiln_MaskLike:$condition, Kiln_Value:$true_value, Kiln_Value:$false_value);
  let results = (outs Kiln_Value:$result);
  let assemblyFormat = "$condition `,` $true_value `,` $false_value attr-dict `:` type($result)";
}

#endif // KILN_OPS_TD
