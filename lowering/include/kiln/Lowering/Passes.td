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
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
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
                        "buffers per ring (2: double buffering); 1 disables the pass">];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def ConvertKilnToGpu : Pass<"convert-kiln-to-gpu", "mlir::ModuleOp"> {
  let summary = "Distribute kiln tiles over the threads of a CTA and emit a gpu.func";
  let description = [{
    Every `kiln.kernel` function becomes a `gpu.func` in a `gpu.module`, run
    by `num-warps * 32` threads. Each tile value gets a layout:

    * *distributed* (numel a multiple of the thread count): thread `t` holds
      flat elements `j * T + t`, so consecutive threads touch consecutive
      addresses and global accesses coalesce;
    * *replicated* (small tiles): every thread holds every element.

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
    Argmax along an axis and `kiln.dot` go through shared memory.
    `kiln.atomic_add` is one `atom` by thread 0 between GPU-scope
    acquire-release fences and barriers, its result shared through shared
    memory. `dot` runs on tensor cores when it
    can (f16/bf16 operands, M a multiple of 16 per warp row, N of 8 per warp
    column, K of 16). Its operands are staged in shared memory, or read in
    place when they come from a `kiln.local_load` (a `kiln.trans` B operand
    as its source's tile, read untransposed). Each warp loads mma fragments
    with `ldmatrix` and issues `mma.sync.m16n8k16` into an accumulator
    *tensor-core layout*; an A operand already in a matching accumulator
    layout (whole rows per warp) is used from registers. Element-wise ops
    and loop-carried values keep that layout (a loop-carried tile takes the
    layout its body computes it in, foreseen before the body is emitted). A
    reduction along the rows of an accumulator leaves a *row slice*: each
    thread holds the rows its accumulator elements lie in, combined per
    thread, across the quad by shuffles and across the warps of a warp row
    through shared memory; broadcasting it back along the rows moves
    nothing. Products whose rows are reduced, or that multiply such rows,
    split rows over warps only. Index arithmetic meeting an accumulator is
    recomputed in its layout. Otherwise `dot` is an FMA loop over K.

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
  let options = [Option<"numWarps", "num-warps", "int", "4", "warps per program (CTA)">];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::math::MathDialect"];
}

#endif // KILN_LOWERING_PASSES_TD
