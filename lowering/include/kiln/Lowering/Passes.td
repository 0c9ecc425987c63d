//===- Passes.td - kiln lowering passes --------------------*- tablegen -*-===//
#ifndef KILN_LOWERING_PASSES_TD
#define KILN_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCpuGridArgs : Pass<"kiln-cpu-grid-args", "mlir::ModuleOp"> {
  let summary = "Turn program ids into trailing kernel arguments for the CPU launcher";
  let description = [{
    On the CPU a program is one call of the kernel function. This pass appends
    six i32 parameters to every `kiln.kernel` function (program id x, y, z,
    then the number of programs along x, y, z) and replaces `kiln.program_id`
    and `kiln.num_programs` with them.

    Before:
    ```mlir
    func.func @k(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
      %pid = kiln.program_id 0 : i32
      ...
    }
    ```
    After:
    ```mlir
    func.func @k(%x: !kiln.ptr<f32>, %pid0: i32, %pid1: i32, %pid2: i32,
                 %n0: i32, %n1: i32, %n2: i32) attributes {kiln.kernel} {
      ... uses of %pid0 ...
    }
    ```
    A kernel with `kiln.cluster_reduce` also gets a function
    `kiln_cluster_size() -> i32` returning its cluster size, from which the
    launcher learns to run each cluster's programs on threads of their own.
  }];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::arith::ArithDialect"];
}

def ConvertKilnToCpu : Pass<"convert-kiln-to-cpu", "mlir::ModuleOp"> {
  let summary = "Lower kiln ops to tensor/linalg/scf/arith and LLVM memory accesses";
  let description = [{
    Pointers become i64 addresses (`tensor<N x !kiln.ptr<T>>` becomes
    `tensor<N x i64>`); `kiln.addptr` becomes integer arithmetic; masked loads
    and stores become element loops with `scf.if` around `llvm.load` /
    `llvm.store`; `kiln.dot` becomes `linalg.matmul`; reductions become
    `linalg.reduce` / `linalg.generic`; shape ops become `tensor` ops and
    `linalg.generic` broadcasts. The result is bufferized and compiled by the
    standard MLIR pipeline.

    Before:
    ```mlir
    %p = kiln.addptr %base, %offs : tensor<4x!kiln.ptr<f32>>, tensor<4xi32>
    ```
    After:
    ```mlir
    %e = arith.extsi %offs : tensor<4xi32> to tensor<4xi64>
    %b = arith.muli %e, %cst4 : tensor<4xi64>
    %p = arith.addi %base, %b : tensor<4xi64>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect"];
}

def KilnPipelineLoads : Pass<"kiln-pipeline-loads", "mlir::ModuleOp"> {
  let summary = "Software-pipeline the global loads of loops that feed tensor cores";
  let description = [{
    In an `scf.for` whose body has a `kiln.dot` (streaming loops without a
    dot are left alone: there the extra registers and shared memory cost more
    than the overlap gains), every `kiln.load` whose addresses depend only on
    the induction variable and loop-invariant values is issued ahead:

    * loads used only as `kiln.dot` operands go through a ring of
      `num-stages` shared-memory buffers (`kiln.local_alloc`), filled by
      asynchronous copies (`kiln.async_copy`, cp.async on the GPU)
      `num-stages - 1` iterations ahead. Each iteration waits for its own
      copies (`kiln.async_wait`, which also synchronises the program), starts
      the copies of iteration `i + num-stages - 1` into the buffer that
      iteration `i - 1` read, and reads its operands with `kiln.local_load`;
    * other loads are prefetched into registers one iteration ahead and
      carried as iteration arguments.

    Copies of iterations past the loop are masked off (`iv < ub` joins the
    mask), so nothing outside the loop's range is read.

    With `tma` (Hopper), a dot operand that is a 2-D block of a row-major
    tensor, `base[(r0 + i) * stride + c0 + j]` masked by
    `(r0 + i < rows) & (c0 + j < cols)` with `base`, `stride`, `rows` and
    `cols` arguments of the kernel, a zero fill and 16-bit elements in rows
    of a multiple of 64, is copied by the Tensor Memory Accelerator instead:
    the kernel gets a `!kiln.tensormap` argument describing the tensor (the
    runtime encodes it at launch), one thread issues `kiln.async_tma_copy`
    into the ring, and each buffer has a shared-memory barrier
    (`kiln.mbarrier_*`) that the copy completes and the iteration waits on
    (with phase `(i / num-stages) % 2`). The tensor's extents replace the
    mask: TMA writes zeros outside them. Only loops not nested in another
    loop are rewritten so.

    A 2-D `kiln.load` before the loop, in its block, whose every use is a
    `kiln.dot` operand inside this loop or later loops of the block (the
    queries of attention) is copied once into a one-buffer ring and read in
    place by every product, instead of being staged in scratch memory by
    each iteration; it is waited for just before the loop
    (`kiln.async_wait` with the ring's first copies still pending).

    Before:
    ```mlir
    scf.for %k = %lb to %ub step %s iter_args(%acc = %0) {
      %p = kiln.addptr %base, %k ...
      %a = kiln.load %p, %m ...
      %d = kiln.dot %a, ..., %acc
      scf.yield %d
    }
    ```
    After (`num-stages = 3`):
    ```mlir
    %ring = kiln.local_alloc : !kiln.shared<3x...>
    kiln.async_copy (%p at %lb), %ring[0], (%m and %lb < %ub)
    kiln.async_commit
    kiln.async_copy (%p at %lb + %s), %ring[1], (%m and %lb + %s < %ub)
    kiln.async_commit
    scf.for %k = %lb to %ub step %s iter_args(%acc = %0) {
      %i = (%k - %lb) / %s
      kiln.async_wait {pending = 1}
      kiln.async_copy (%p at %k + 2 * %s), %ring[(%i + 2) % 3], ...
      kiln.async_commit
      %a = kiln.local_load %ring[%i % 3]
      %d = kiln.dot %a, ..., %acc
      scf.yield %d
    }
    kiln.async_wait {pending = 0}
    ```
  }];
  let options = [Option<"numStages", "num-stages", "int", "2",
                        "buffers per ring (2: double buffering); 1 disables the pass">,
                 Option<"tma", "tma", "bool", "false",
                        "copy the dot operands that are 2-D blocks of a tensor with TMA (sm_90a)">];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnCoalesce : Pass<"kiln-coalesce", "mlir::ModuleOp"> {
  let summary = "Give every tile of a GPU kernel the layout its global accesses coalesce in";
  let description = [{
    The first of the GPU layout passes. Every tile value of every
    `kiln.kernel` function gets a layout encoding: `#kiln.blocked` when its
    elements divide among the `32 * num-warps` threads (consecutive threads
    hold consecutive groups of up to 8 elements of a row, so that a warp's
    accesses cover whole cache lines with 16-byte accesses where the
    addresses are contiguous), `#kiln.replicated` for tiles too small to
    divide. The groups are a function of the shape, so that every tile of
    one shape has one layout and element-wise code needs no conversions.
    The module records `kiln.num_warps`.

    Before:
    ```mlir
    %r = kiln.make_range 0 to 1024 : tensor<1024xi32>
    %m = kiln.make_range 0 to 16 : tensor<16xi32>
    ```
    After (`num-warps = 4`):
    ```mlir
    %r = kiln.make_range 0 to 1024 : tensor<1024xi32, #kiln.blocked<vec = 8, warps = 4>>
    %m = kiln.make_range 0 to 16 : tensor<16xi32, #kiln.replicated<warps = 4>>
    ```
  }];
  let options = [Option<"numWarps", "num-warps", "int", "4", "warps per program (CTA)">];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnAccelerateMatmul : Pass<"kiln-accelerate-matmul", "mlir::ModuleOp"> {
  let summary = "Put kiln.dot on tensor cores: accumulator and operand layouts";
  let description = [{
    Every `kiln.dot` of f16/bf16 operands with K a multiple of 16 whose
    (M, N) tile splits over the warps gets a `#kiln.mma` accumulator: its
    accumulator operand is converted to it and its result converted back for
    its users (kiln-remove-layout-conversions then carries the accumulator
    layout forward). The warps are split to make each warp's region as
    square as possible, except for products whose rows are reduced
    (attention scores) or that multiply values computed from another
    product (probabilities times V): those put every warp on rows, so that
    a warp holds whole rows, reduces them with shuffles and feeds them to
    the next product from its registers.

    Operands are read from shared memory (`#kiln.shared`, XOR-swizzled for
    ldmatrix when 16-bit rows allow): a `kiln.local_load` of a pipelining
    ring whose only users are tensor-core operands is read in place, and a
    `kiln.trans` whose only users are B operands is its source's tile read
    transposed (`transposed = true`); other operands are converted.

    For `arch=sm_90a`, a product whose A and B are both read in place from
    rings (B as is or transposed) and whose rows split over whole
    warpgroups, 64 rows each (M = 16 * num-warps), with K a multiple of 64
    (128-byte rows of A, or of B when it is transposed), N a multiple of 64
    for a B as is and N up to 256, gets `#kiln.mma<version = 3>`: Hopper's
    `wgmma`, reading both operands from shared memory through matrix
    descriptors (the rings' 128-byte swizzle is wgmma's).

    Before:
    ```mlir
    %d = kiln.dot %a, %b, %acc : tensor<64x32xf16, #blocked>, tensor<32x64xf16, #blocked> -> tensor<64x64xf32, #blocked>
    ```
    After (4 warps):
    ```mlir
    %acc2 = kiln.convert_layout %acc : tensor<64x64xf32, #blocked> -> tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 2, warpsN = 2>>
    %a2 = kiln.convert_layout %a : ... -> tensor<64x32xf16, #kiln.shared<swizzle = true, transposed = false, warps = 4>>
    %b2 = kiln.convert_layout %b : ... -> tensor<32x64xf16, #kiln.shared<swizzle = true, transposed = false, warps = 4>>
    %d2 = kiln.dot %a2, %b2, %acc2 : ... -> tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 2, warpsN = 2>>
    %d = kiln.convert_layout %d2 : ... -> tensor<64x64xf32, #blocked>
    ```
  }];
  let options = [Option<"arch", "arch", "std::string", "\"sm_80\"",
                        "CUDA architecture: sm_90a enables wgmma (#kiln.mma<version = 3>)">];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnPipelineMma : Pass<"kiln-pipeline-mma", "mlir::ModuleOp"> {
  let summary = "Keep Hopper's asynchronous products in flight across loop iterations and following work";
  let description = [{
    In a loop whose one product is on wgmma (`#kiln.mma<version = 3>`) with
    its accumulator carried by the loop, the product becomes `async`: it is
    followed by `kiln.dot_wait {pendings = 1, sync}` (the previous
    iteration's product is complete, in every warpgroup), the iteration's
    ring copies move after that wait (they overwrite the buffer the previous
    products read), and the loop's result goes through
    `kiln.dot_wait {pendings = 0}` after the loop. The tensor cores then run
    one iteration's product while the program waits for the next operands.

    Before:
    ```mlir
    %r = scf.for ... iter_args(%acc = %zero) {
      kiln.async_wait {pending = 1 : i32}
      kiln.async_copy %p, %ring[%ahead] ...
      kiln.async_commit
      %d = kiln.dot %a, %b, %acc ...
      scf.yield %d
    }
    ```
    After:
    ```mlir
    %r = scf.for ... iter_args(%acc = %zero) {
      kiln.async_wait {pending = 1 : i32}
      %d = kiln.dot %a, %b, %acc {async} ...
      %w = kiln.dot_wait %d {pendings = 1 : i32, sync}
      kiln.async_copy %p, %ring[%ahead] ...
      kiln.async_commit
      scf.yield %w
    }
    %done = kiln.dot_wait %r {pendings = 0 : i32}
    ```

    Any other wgmma product that reads its operands in place (rings, or A
    from registers in `#kiln.dot_operand`) and whose result is first used
    further down its block, with no copies into shared memory or nested
    regions in between, becomes `async` too, followed just before that first
    use by `kiln.dot_wait` whose `pendings` counts the products issued after
    it: the element-wise work in between runs while the tensor cores compute.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnWarpSpecialize : Pass<"kiln-warp-specialize", "mlir::ModuleOp"> {
  let summary = "A producer warp issues a TMA loop's copies; optionally, programs loop over tiles (persistent)";
  let description = [{
    Runs after kiln-pipeline-mma, on kernels with one top-level loop whose
    product operands all arrive by TMA and whose product is carried
    asynchronously (`kiln.dot_wait {pendings = 1, sync}`). Such a loop's
    warps meet at a barrier every iteration before one thread may overwrite
    the buffer the previous products read. Here the copies move to a
    `kiln.producer` warp of their own, and every ring buffer gets a second
    barrier ("empty", one arrival per consumer warp):

    * the producer runs the loop's iterations with only the copies: it waits
      until buffer `g % S` is empty (parity `(g / S + 1) % 2`, so that the
      first pass over the ring does not wait), copies iteration `g`'s tiles
      into it and arrives on its "full" barrier, which the copies complete;
    * the consumer warps wait on "full" as before, issue the product, wait
      for the previous one (no barrier any more) and arrive on the previous
      buffer's "empty" barrier; after the loop, once the last product is
      done, on the last buffer's. The prologue copies go.

    With `persistent`, the kernel is launched with as many programs as fit on
    the GPU at once; each loops over the tiles `t = program, program + P,
    ...` of the grid it was launched for (passed as three more `i32`
    arguments, the function's `kiln.virtual_grid` says where), with
    `kiln.program_id` and `kiln.num_programs` rewritten to that tile's. The
    producer and the consumers run the same tile loop, counting the ring's
    iterations `g` across tiles, so the producer fills the ring for the
    next tile while the consumers run this tile's epilogue.

    Only the copies' coordinates and the loop's bounds run on the producer:
    they must be scalars computed by pure ops. Other kernels are left as
    they are.

    Before:
    ```mlir
    kiln.async_tma_copy %ma[%r, %c0], %ra[%c0], %full[%c0] if %p0 ...
    kiln.mbarrier_arrive %full[%c0] if %p0
    %acc = scf.for %k = %c0 to %K step %c64 iter_args(%c = %zero) {
      kiln.mbarrier_wait %full[%s], %ph
      %d = kiln.dot %a, %b, %c {async}
      %w = kiln.dot_wait %d {pendings = 1 : i32, sync}
      kiln.async_tma_copy %ma[%r, %k2], %ra[%ahead], %full[%ahead] if %p
      kiln.mbarrier_arrive %full[%ahead] if %p
      scf.yield %w
    }
    %r = kiln.dot_wait %acc {pendings = 0 : i32}
    ```
    After:
    ```mlir
    kiln.mbarrier_init %empty {arrivals = 8 : i32}
    kiln.producer warps(1) {
      scf.for %k = %c0 to %K step %c64 {
        kiln.mbarrier_wait %empty[%s], %free
        kiln.async_tma_copy %ma[%r, %k], %ra[%s], %full[%s]
        kiln.mbarrier_arrive %full[%s]
      }
    }
    %acc = scf.for %k = %c0 to %K step %c64 iter_args(%c = %zero) {
      kiln.mbarrier_wait %full[%s], %ph
      %d = kiln.dot %a, %b, %c {async}
      %w = kiln.dot_wait %d {pendings = 1 : i32}
      kiln.mbarrier_arrive %empty[%prev] if %notFirst {per_warp}
      scf.yield %w
    }
    %r = kiln.dot_wait %acc {pendings = 0 : i32}
    kiln.mbarrier_arrive %empty[%last] if %any {per_warp}
    ```
  }];
  let options = [Option<"persistent", "persistent", "bool", "false",
                        "launch one program per resident slot, looping over the grid's tiles">];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnRemoveLayoutConversions : Pass<"kiln-remove-layout-conversions", "mlir::ModuleOp"> {
  let summary = "Keep values in tensor-core layouts; carry them across loops";
  let description = [{
    Moves tensor-core layouts forward from the conversions that
    kiln-accelerate-matmul leaves behind, so that values computed from a
    product never leave its registers:

    * an element-wise op with an operand available in a `#kiln.mma` layout
      (or, failing that, a `#kiln.slice` of one) is computed in it, its other
      operands converted (uniform ones are remade in it);
    * a `kiln.reduce` along the rows of an accumulator leaves a
      `#kiln.slice<dim = 1>` of it; `kiln.expand_dims` and `kiln.reshape`
      between (M) and (M, 1) keep it; a `kiln.broadcast` of it along the rows
      is the accumulator layout again (nothing moves);
    * a loop-carried tile that the loop body yields in such a layout is
      carried in it: the conversion is hoisted out of the loop, onto the
      initial value and the loop's result;
    * a row broadcast into an accumulator layout, (1, N) -> (M, N) (a bias
      row), is computed in its `#kiln.slice<dim = 0>` with the ranges,
      splats, index arithmetic, loads and casts that make it, when it alone
      uses the loaded row: each thread loads its own columns;
    * a tile loaded only to be converted into an accumulator layout, possibly
      through a cast (a residual), is loaded in that layout, its addresses
      and mask (index arithmetic) converted instead of the loaded values;
    * an A operand of a product, converted from an accumulator whose warps
      hold the same whole rows, is taken from registers
      (`#kiln.dot_operand`), not through shared memory.

    Conversions that cancel or convert to the same layout fold away; the
    rest is what the lowering moves between threads.

    Before:
    ```mlir
    %s = kiln.convert_layout %d : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
    %m = kiln.reduce max %s axis 1 : tensor<64x64xf32, #blocked> -> tensor<64xf32, #blocked1>
    ```
    After:
    ```mlir
    %m = kiln.reduce max %d axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #kiln.slice<dim = 1, parent = #mma>>
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnTmaStores : Pass<"kiln-tma-stores", "mlir::ModuleOp"> {
  let summary = "Store accumulator tiles of a kernel's epilogue with the Tensor Memory Accelerator";
  let description = [{
    Hopper. A `kiln.store` of a tile converted from an accumulator layout
    (`#kiln.mma`) to a blocked one, at the top level of a kernel with
    nothing after it that touches global memory but other such stores (the
    epilogue), whose addresses and mask are those of a 2-D block of a
    row-major tensor, `base[(r0 + i) * stride + c0 + j]` masked by
    `(r0 + i < rows) & (c0 + j < cols)` with `base`, `stride`, `rows` and
    `cols` arguments of the kernel, and whose rows are a multiple of 128
    bytes of f16, bf16 or f32, becomes a `kiln.tma_store` of the
    accumulator-layout tile itself: the kernel gets a `!kiln.tensormap`
    argument describing the tensor (encoded by the runtime at launch, which
    falls back to a kernel without TMA where the tensor is not 16-byte
    aligned), the threads write their own elements into shared memory in
    TMA's swizzled layout, and one thread copies the tile out. This removes
    the regrouping conversion's reads of shared memory, the per-thread
    global stores and their masks; the tensor's extents clip the tile.

    Tiles of fewer than `min-elements` elements keep their stores: in the
    short programs of small tiles the copy's issue and the wait for it to
    be read cost more than the regrouping they replace (measured on the
    H200: 64x64 tiles of GPT-2's 256-row products lost 3-18%, 64x128 and
    larger tiles gained 2-15%).

    Before:
    ```mlir
    %b = kiln.convert_layout %acc : tensor<128x128xf16, #mma> -> tensor<128x128xf16, #blocked>
    kiln.store %ptrs, %b, %mask : tensor<128x128x!kiln.ptr<f16>, #blocked>
    ```
    After:
    ```mlir
    kiln.tma_store %acc, %map[%r0, %c0] : tensor<128x128xf16, #mma>
    ```
  }];
  let options = [Option<"minElements", "min-elements", "int64_t", "8192",
                        "the smallest tile (in elements) stored by TMA">];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::arith::ArithDialect"];
}

def ConvertKilnToGpu : Pass<"convert-kiln-to-gpu", "mlir::ModuleOp"> {
  let summary = "Distribute kiln tiles over the threads of a CTA and emit a gpu.func";
  let description = [{
    Every `kiln.kernel` function becomes a `gpu.func` in a `gpu.module`, run
    by `num-warps * 32` threads. Every tile must carry the layout the layout
    passes chose (kiln-coalesce, kiln-accelerate-matmul,
    kiln-remove-layout-conversions): a tile value becomes the elements this
    thread holds under it, and `kiln.convert_layout` moves elements between
    threads. The lowering decides no layout itself.

    It is a dialect conversion: the type converter turns a tile into the
    elements a thread holds (1:N; pointers become i64 addresses, rings and
    `#kiln.shared` tiles an i32 byte offset in shared memory), each op family
    has its own file of conversion patterns (lowering/lib/*ToGpu.cpp), `scf.for`
    carries every element of its tiles through the structural conversion,
    and arith/math ops on scalars stay as they are.

    Element-wise ops, loads and stores act on each thread's elements; an
    element several threads hold (a scalar, a replicated tile) is stored by
    the lowest-numbered of them only, so that a read-modify-write of it
    happens once.
    A vector load is a predicated PTX instruction that runs where its group
    is aligned and unmasked; element loads for the other groups sit behind a
    rarely-taken branch (in line, predicated, past 48 groups in a kernel,
    where ptxas's register allocation would break down). Masked element
    loads are predicated instructions too. Nothing on the common path reads
    a loaded register before the next load issues, so all of a thread's
    loads can be in flight. Multiplies and adds may contract into fma.
    Broadcasts of index arithmetic (ranges, splats, integer ops, pointer
    offsets) are recomputed at each destination element; other broadcasts
    between layouts go through shared memory. A reduction along the last
    axis, or along axis 0 of a matrix, combines per thread, then across
    lanes by shuffles, then once through shared memory; other axis
    reductions fold each result's row in a loop. A reduction or argmax of a
    distributed 1-D tile to a scalar combines per thread, then across the
    warp with butterfly shuffles, then across warps through shared memory.
    Consecutive reductions that do not read each other's results share that
    exchange: each stores its partials in its own scratch slot, one barrier,
    each reads its partials back, one barrier (two barriers for the run,
    not two each). Argmax along an axis and `kiln.dot` go through shared memory.
    `kiln.atomic_add` is one `atom` by thread 0 between GPU-scope
    acquire-release fences and barriers, its result shared through shared
    memory. `kiln.dot` with a `#kiln.mma` result runs on tensor cores: its
    `#kiln.shared` operands are read in place from a ring (a transposed view
    as its source's tile) or, for one converted to shared memory, staged in
    scratch first; each warp loads mma fragments with `ldmatrix` and issues
    `mma.sync.m16n8k16`. A `#kiln.dot_operand` A operand is the registers of
    the accumulator it was converted from. A reduction along the rows of an
    accumulator (into a `#kiln.slice`) combines per thread, across the quad
    by shuffles and across the warps of a warp row through shared memory;
    broadcasting a row slice back along the rows moves nothing.
    `kiln.convert_layout` into an accumulator or a row slice recomputes
    index arithmetic in the new layout, gathers a broadcast from its smaller
    source, and otherwise goes through shared memory, as does a conversion
    back. Otherwise `dot` is an FMA loop over K.

    Vector groups are whole when aligned and unmasked; for *prefix masks*
    (`i < n` along the last dimension, and conjunctions with masks uniform
    along it) the group's last bit says so and its first whether any element
    is live. The element path of a group addresses from its first element.

    Shared memory is dynamic: the rings of `kiln.local_alloc` come first,
    then one scratch area reused by every exchange. The total, up to 227 KB,
    is recorded in the global `kiln_smem_bytes`, which the runtime reads to
    launch with that much. `kiln.async_copy` becomes 16-byte `cp.async.cg`
    copies where a group is aligned and unmasked, and element loads
    otherwise. `kiln.async_wait` becomes `cp.async.wait_group` followed by a
    barrier.

    Before:
    ```mlir
    func.func @k(%x: !kiln.ptr<f32>) attributes {kiln.kernel} { ... }
    ```
    After:
    ```mlir
    gpu.module @kiln { gpu.func @k(%x: i64) kernel attributes {known_block_size = array<i32: 128, 1, 1>} { ... } }
    ```
  }];
  let options = [Option<"numWarps", "num-warps", "int", "4", "warps per program (CTA)">,
                 Option<"arch", "arch", "std::string", "\"sm_80\"",
                        "CUDA architecture: below sm_90, kiln.grid_dependency_wait and "
                        "kiln.launch_dependents lower to nothing (no programmatic dependent launch)">];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::math::MathDialect"];
}

#endif // KILN_LOWERING_PASSES_TD
