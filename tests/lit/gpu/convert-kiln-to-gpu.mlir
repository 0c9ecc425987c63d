// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=1" -kiln-accelerate-matmul -kiln-remove-layout-conversions -convert-kiln-to-gpu="num-warps=1 arch=sm_90a" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=1" -kiln-accelerate-matmul -kiln-remove-layout-conversions -convert-kiln-to-gpu="num-warps=1 arch=sm_80" | FileCheck %s --check-prefix=SM80

// A 64-element tile over 32 threads is distributed: each thread holds two
// consecutive elements (flat 2 * tid, 2 * tid + 1). The pointers are known to
// be consecutive, so the load is one 8-byte vector load when the address is
// aligned and both mask bits are set (checked at run time). The mask is
// `i < n` with i consecutive: it holds for a prefix of every group, so the
// group is whole when its last bit is set and touched at all when its first
// is. The vector load is a predicated PTX instruction in line; the two masked
// element loads for a misaligned or partly masked group sit behind a branch,
// and the common path never reads the loaded registers, so the loads of a
// thread's groups can all be in flight at once.
// CHECK-LABEL: gpu.module @test_distributed_module
// CHECK: gpu.func @test_distributed(%[[X:.*]]: i64, %[[N:.*]]: i32) kernel attributes {known_block_size = array<i32: 32, 1, 1>}
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[T:.*]] = arith.index_cast %[[TID]] : index to i32
// CHECK: %[[C2:.*]] = arith.constant 2 : i32
// CHECK: arith.muli %[[T]], %[[C2]] : i32
// CHECK: %[[M0:.*]] = arith.cmpi slt, %{{.*}}, %[[N]] : i32
// CHECK: %[[M1:.*]] = arith.cmpi slt, %{{.*}}, %[[N]] : i32
// CHECK: %[[LOW:.*]] = arith.andi %{{.*}}, %c7_i64 : i64
// CHECK: %[[ALIGNED:.*]] = arith.cmpi eq, %[[LOW]], %c0_i64 : i64
// CHECK: %[[FAST:.*]] = arith.andi %[[ALIGNED]], %[[M1]] : i1
// CHECK: %[[NOTFAST:.*]] = arith.xori %[[FAST]], %true : i1
// CHECK: llvm.inline_asm has_side_effects "mov.b64 $0, 0;\0A\09@$2 ld.global.b64 $0, [$1];", "=l,l,b" %{{.*}}, %[[FAST]] : (i64, i1) -> i64
// CHECK: %[[VEC:.*]] = llvm.bitcast %{{.*}} : i64 to vector<2xf32>
// CHECK: %[[SLOW:.*]] = arith.andi %[[NOTFAST]], %[[M0]] : i1
// CHECK: scf.if %[[SLOW]] -> (vector<2xf32>) {
// CHECK: llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$2 ld.global.b32 $0, [$1];", "=r,l,b" %{{.*}}, %[[M0]] : (i64, i1) -> i32
// CHECK: llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$2 ld.global.b32 $0, [$1];", "=r,l,b" %{{.*}}, %[[M1]] : (i64, i1) -> i32
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[VEC]] : vector<2xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK: gpu.return
func.func @test_distributed(%x: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %ns = kiln.splat %n : tensor<64xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %p, %m : tensor<64x!kiln.ptr<f32>>
  %e = math.exp %v : tensor<64xf32>
  kiln.store %p, %e, %m : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

// A 1-D reduction to a scalar: per-thread combine, then butterfly shuffles;
// every thread holds the sum, and thread 0 alone stores it.
// CHECK-LABEL: gpu.func @test_reduce
// CHECK: arith.addf
// CHECK: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK-NOT: gpu.barrier
// CHECK: llvm.inline_asm has_side_effects "@$2 st.global.b32 [$0], $1;"
func.func @test_reduce(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %p : tensor<64x!kiln.ptr<f32>>
  %s = kiln.reduce sum %v axis 0 : tensor<64xf32> -> f32
  kiln.store %x, %s : !kiln.ptr<f32>
  return
}

// -----

// Broadcasting a distributed tile of data goes through shared memory between
// barriers. A reduction along axis 0 combines in each thread, then across
// lanes by shuffles, then through shared memory: the scratch buffer is 256
// bytes (the 64 f32 of the broadcast source; the 64 partial sums of the one
// warp). Shared memory is dynamic: an extern array, with its size in a
// global the runtime reads at load time.
// CHECK: llvm.mlir.global external @kiln_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global external constant @kiln_smem_bytes(256 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32
// CHECK-LABEL: gpu.func @test_broadcast
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// CHECK: arith.addf
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: scf.if
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK: gpu.barrier
func.func @test_broadcast(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %p : tensor<64x!kiln.ptr<f32>>
  %c = kiln.expand_dims %v {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
  %b = kiln.broadcast %c : tensor<1x64xf32> -> tensor<2x64xf32>
  %s = kiln.reduce sum %b axis 0 : tensor<2x64xf32> -> tensor<64xf32>
  kiln.store %p, %s : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

// A row broadcast into rows dealt out in the same columns moves nothing:
// with 16-byte groups of f16, thread t holds columns 8t..8t+7 of the
// (1, 256) row and of both rows of the (2, 256) tile, so each of its 16
// destination elements is one of its own 8 (no shared memory, no barrier).
// CHECK-LABEL: gpu.func @test_broadcast_rows_in_place
// CHECK-NOT: gpu.barrier
// CHECK-NOT: !llvm.ptr<3>
// CHECK: gpu.return
func.func @test_broadcast_rows_in_place(%x: !kiln.ptr<f16>, %y: !kiln.ptr<f16>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 256 : tensor<256xi32>
  %xs = kiln.splat %x : tensor<256x!kiln.ptr<f16>>
  %p = kiln.addptr %xs, %r : tensor<256x!kiln.ptr<f16>>, tensor<256xi32>
  %v = kiln.load %p : tensor<256x!kiln.ptr<f16>>
  %e = math.exp %v : tensor<256xf16>
  %c = kiln.expand_dims %e {axis = 0 : i32} : tensor<256xf16> -> tensor<1x256xf16>
  %b = kiln.broadcast %c : tensor<1x256xf16> -> tensor<2x256xf16>
  %rows = kiln.make_range 0 to 2 : tensor<2xi32>
  %rows1 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<2xi32> -> tensor<2x1xi32>
  %c256 = arith.constant dense<256> : tensor<2x1xi32>
  %starts = arith.muli %rows1, %c256 : tensor<2x1xi32>
  %starts2 = kiln.broadcast %starts : tensor<2x1xi32> -> tensor<2x256xi32>
  %cols = kiln.expand_dims %r {axis = 0 : i32} : tensor<256xi32> -> tensor<1x256xi32>
  %cols2 = kiln.broadcast %cols : tensor<1x256xi32> -> tensor<2x256xi32>
  %offs = arith.addi %starts2, %cols2 : tensor<2x256xi32>
  %ys = kiln.splat %y : tensor<2x256x!kiln.ptr<f16>>
  %py = kiln.addptr %ys, %offs : tensor<2x256x!kiln.ptr<f16>>, tensor<2x256xi32>
  kiln.store %py, %b : tensor<2x256x!kiln.ptr<f16>>
  return
}

// -----

// Index arithmetic is recomputed where it is broadcast (no shared memory),
// and a row sum along the last axis is a warp shuffle (16 lanes per row of
// 64 f32 in groups of 4: the load is contiguous, so kiln-coalesce makes each
// thread's group one 16-byte access), written once per row to shared memory.
// CHECK-LABEL: gpu.func @test_row_sum
// CHECK-NOT: gpu.barrier
// CHECK: llvm.inline_asm has_side_effects {{.*}}ld.global.v4.b32
// CHECK-NOT: gpu.barrier
// CHECK-NOT: %c16_i32{{.*}}%c32_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK: gpu.barrier
func.func @test_row_sum(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 8 : tensor<8xi32>
  %c = kiln.make_range 0 to 64 : tensor<64xi32>
  %c64 = arith.constant dense<64> : tensor<8x1xi32>
  %re = kiln.expand_dims %r {axis = 1 : i32} : tensor<8xi32> -> tensor<8x1xi32>
  %rm = arith.muli %re, %c64 : tensor<8x1xi32>
  %rb = kiln.broadcast %rm : tensor<8x1xi32> -> tensor<8x64xi32>
  %ce = kiln.expand_dims %c {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %cb = kiln.broadcast %ce : tensor<1x64xi32> -> tensor<8x64xi32>
  %off = arith.addi %rb, %cb : tensor<8x64xi32>
  %xs = kiln.splat %x : tensor<8x64x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %off : tensor<8x64x!kiln.ptr<f32>>, tensor<8x64xi32>
  %v = kiln.load %p : tensor<8x64x!kiln.ptr<f32>>
  %s = kiln.reduce sum %v axis 1 : tensor<8x64xf32> -> tensor<8xf32>
  %ys = kiln.splat %y : tensor<8x!kiln.ptr<f32>>
  %q = kiln.addptr %ys, %r : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  kiln.store %q, %s : tensor<8x!kiln.ptr<f32>>
  return
}

// -----

// An f16 dot runs on tensor cores: A and B are staged in swizzled shared
// memory, fragments come from ldmatrix (B transposed), mma.sync accumulates
// in f32. 32x32 over 1 warp: 2 x 4 mma tiles per 16-deep K step.
// CHECK-LABEL: gpu.func @test_mma_dot
// CHECK: gpu.barrier
// CHECK: nvvm.ldmatrix {{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<col>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK: nvvm.ldmatrix {{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-15: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return
func.func @test_mma_dot(%a: !kiln.ptr<f16>, %c: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 1024 : tensor<1024xi32>
  %pa = kiln.splat %a : tensor<1024x!kiln.ptr<f16>>
  %p = kiln.addptr %pa, %r : tensor<1024x!kiln.ptr<f16>>, tensor<1024xi32>
  %flat = kiln.load %p : tensor<1024x!kiln.ptr<f16>>
  %t = kiln.reshape %flat : tensor<1024xf16> -> tensor<32x32xf16>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %d = kiln.dot %t, %t, %zero : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %df = kiln.reshape %d : tensor<32x32xf32> -> tensor<1024xf32>
  %pc = kiln.splat %c : tensor<1024x!kiln.ptr<f32>>
  %q = kiln.addptr %pc, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  kiln.store %q, %df : tensor<1024x!kiln.ptr<f32>>
  return
}

// -----

// Ring buffers come first in shared memory (2 stages x 32x32 f16 = 4 KB),
// then the scratch area (4 KB for the broadcasts: a 32-element range on one
// warp is one element per thread, so broadcasting it moves data). Asynchronous copies are one 16-byte cp.async
// per aligned, unmasked group (element loads otherwise); a wait is
// cp.async.wait_group then a barrier; a dot reads a local_load operand in
// place with ldmatrix, with no staging and no barrier of its own.
// CHECK: llvm.mlir.global external constant @kiln_smem_bytes(8192 : i32)
// CHECK-LABEL: gpu.func @test_ring
// CHECK: scf.if
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK: } else {
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.ldmatrix
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mma.sync
// CHECK-COUNT-15: nvvm.mma.sync
// CHECK: gpu.return
func.func @test_ring(%a: !kiln.ptr<f16>, %c: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %ring = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  %r = kiln.make_range 0 to 32 : tensor<32xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %col = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %c32 = arith.constant dense<32> : tensor<32x1xi32>
  %rows = arith.muli %row, %c32 : tensor<32x1xi32>
  %rb = kiln.broadcast %rows : tensor<32x1xi32> -> tensor<32x32xi32>
  %cb = kiln.broadcast %col : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rb, %cb : tensor<32x32xi32>
  %pa = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %p = kiln.addptr %pa, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %lim = arith.constant dense<1000> : tensor<32x32xi32>
  %m = arith.cmpi slt, %off, %lim : tensor<32x32xi32>
  kiln.async_copy %p, %ring[%c0], %m : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t = kiln.local_load %ring[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %d = kiln.dot %t, %t, %zero : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %pc = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  %q = kiln.addptr %pc, %off : tensor<32x32x!kiln.ptr<f32>>, tensor<32x32xi32>
  kiln.store %q, %d : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// Rings whose lifetimes do not overlap share bytes: the first ring's last
// reader is done at the wait after it, before the second ring is allocated,
// so both sit at offset 0 (4 KB of rings, then 4 KB of scratch).
// CHECK: llvm.mlir.global external constant @kiln_smem_bytes(8192 : i32)
// CHECK-LABEL: gpu.func @test_rings_share
func.func @test_rings_share(%a: !kiln.ptr<f16>, %c: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %r = kiln.make_range 0 to 32 : tensor<32xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %col = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %c32 = arith.constant dense<32> : tensor<32x1xi32>
  %rows = arith.muli %row, %c32 : tensor<32x1xi32>
  %rb = kiln.broadcast %rows : tensor<32x1xi32> -> tensor<32x32xi32>
  %cb = kiln.broadcast %col : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rb, %cb : tensor<32x32xi32>
  %pa = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %p = kiln.addptr %pa, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %ring = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  kiln.async_copy %p, %ring[%c0] : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t = kiln.local_load %ring[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %d = kiln.dot %t, %t, %zero : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  kiln.async_wait {pending = 0 : i32}
  %ring2 = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  kiln.async_copy %p, %ring2[%c0] : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t2 = kiln.local_load %ring2[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %d2 = kiln.dot %t2, %t2, %d : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %pc = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  %q = kiln.addptr %pc, %off : tensor<32x32x!kiln.ptr<f32>>, tensor<32x32xi32>
  kiln.store %q, %d2 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// Once the last ring is dead (its kiln.async_wait, with the barrier every
// thread passes after its last read of it), the epilogue's exchanges reuse
// its bytes: the second product's operands are staged at byte 0, and the
// kernel needs 4224 bytes rather than the ring's 4096 plus 4224 of scratch.
// CHECK: llvm.mlir.global external constant @kiln_smem_bytes(4224 : i32)
// CHECK-LABEL: gpu.func @test_epilogue_reuses_rings
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: nvvm.cp.async
// CHECK: llvm.store {{.*}} : vector<{{.*}}>, !llvm.ptr<3>
func.func @test_epilogue_reuses_rings(%a: !kiln.ptr<f16>, %c: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %r = kiln.make_range 0 to 32 : tensor<32xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %col = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %c32 = arith.constant dense<32> : tensor<32x1xi32>
  %rows = arith.muli %row, %c32 : tensor<32x1xi32>
  %rb = kiln.broadcast %rows : tensor<32x1xi32> -> tensor<32x32xi32>
  %cb = kiln.broadcast %col : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rb, %cb : tensor<32x32xi32>
  %pa = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %p = kiln.addptr %pa, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %ring = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  kiln.async_copy %p, %ring[%c0] : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t = kiln.local_load %ring[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %d = kiln.dot %t, %t, %zero : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  kiln.async_wait {pending = 0 : i32}
  %h = arith.truncf %d : tensor<32x32xf32> to tensor<32x32xf16>
  %d2 = kiln.dot %h, %h, %d : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %pc = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  %q = kiln.addptr %pc, %off : tensor<32x32x!kiln.ptr<f32>>, tensor<32x32xi32>
  kiln.store %q, %d2 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// A ring still read after the second one is allocated (its tile is a
// product operand after the second ring's copies) keeps its own bytes.
// CHECK: llvm.mlir.global external constant @kiln_smem_bytes(12288 : i32)
// CHECK-LABEL: gpu.func @test_rings_overlap
func.func @test_rings_overlap(%a: !kiln.ptr<f16>, %c: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %r = kiln.make_range 0 to 32 : tensor<32xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %col = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %c32 = arith.constant dense<32> : tensor<32x1xi32>
  %rows = arith.muli %row, %c32 : tensor<32x1xi32>
  %rb = kiln.broadcast %rows : tensor<32x1xi32> -> tensor<32x32xi32>
  %cb = kiln.broadcast %col : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rb, %cb : tensor<32x32xi32>
  %pa = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %p = kiln.addptr %pa, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %ring = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  kiln.async_copy %p, %ring[%c0] : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t = kiln.local_load %ring[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %d = kiln.dot %t, %t, %zero : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %ring2 = kiln.local_alloc : !kiln.shared<2x32x32xf16>
  kiln.async_copy %p, %ring2[%c0] : tensor<32x32x!kiln.ptr<f16>>, !kiln.shared<2x32x32xf16>
  kiln.async_commit
  kiln.async_wait {pending = 0 : i32}
  %t2 = kiln.local_load %ring2[%c0] : !kiln.shared<2x32x32xf16> -> tensor<32x32xf16>
  %d2 = kiln.dot %t, %t2, %d : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf32>
  %pc = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  %q = kiln.addptr %pc, %off : tensor<32x32x!kiln.ptr<f32>>, tensor<32x32xi32>
  kiln.store %q, %d2 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// An atomic add runs once per program: every thread fences its stores, then
// thread 0 adds (acquire-release, GPU scope) and shares the old value
// through shared memory; a second fence orders the threads' later loads.
// CHECK-LABEL: gpu.func @test_atomic_add
// CHECK: llvm.fence syncscope("device") acq_rel
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: llvm.atomicrmw add {{.*}} syncscope("device") acq_rel
// CHECK: llvm.store
// CHECK: gpu.barrier
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> i32
// CHECK: gpu.barrier
// CHECK: llvm.fence syncscope("device") acq_rel
func.func @test_atomic_add(%c: !kiln.ptr<i32>, %out: !kiln.ptr<i32>) attributes {kiln.kernel} {
  %one = arith.constant 1 : i32
  %old = kiln.atomic_add %c, %one : !kiln.ptr<i32>
  kiln.store %out, %old : !kiln.ptr<i32>
  return
}

// -----

// A tile smaller than the block is replicated: each thread loads all 16
// elements. Masked element loads are predicated PTX loads of a zeroed
// register, not branches around loads: a branch would make the thread wait
// for each load where its value is first used, before issuing the next. A
// zero fill needs no select; another fill is selected by the mask.
// CHECK-LABEL: gpu.func @test_masked_replicated
// CHECK-NOT: scf.if
// CHECK: %[[M0:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK: llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$2 ld.global.b32 $0, [$1];", "=r,l,b" %{{.*}}, %[[M0]] : (i64, i1) -> i32
// CHECK-NOT: scf.if
// CHECK: arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// CHECK-NOT: scf.if
// CHECK: gpu.return
func.func @test_masked_replicated(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %ns = kiln.splat %n : tensor<16xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<16xi32>
  %xs = kiln.splat %x : tensor<16x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
  %zero = arith.constant dense<0.0> : tensor<16xf32>
  %a = kiln.load %p, %m, %zero : tensor<16x!kiln.ptr<f32>>
  %big = arith.constant dense<-1.0e30> : tensor<16xf32>
  %c = kiln.load %p, %m, %big : tensor<16x!kiln.ptr<f32>>
  %s = arith.addf %a, %c : tensor<16xf32>
  %ys = kiln.splat %y : tensor<16x!kiln.ptr<f32>>
  %q = kiln.addptr %ys, %r : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
  kiln.store %q, %s : tensor<16x!kiln.ptr<f32>>
  return
}

// -----

// q @ k^T with k read as it is (ldmatrix without .trans for B), then a row
// maximum broadcast back along the rows: the maximum stays in the rows of the
// accumulator layout (a thread's two columns, then the four lanes of its quad
// by shuffles), and the subtraction uses it where it is, with no exchange
// through shared memory.
// CHECK-LABEL: gpu.func @test_rows
// CHECK-NOT: nvvm.mma_layout<col>, num
// CHECK: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.barrier
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK-NOT: gpu.barrier
// CHECK: arith.subf
func.func @test_rows(%q: !kiln.ptr<f16>, %k: !kiln.ptr<f16>, %o: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %rows = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %cols = kiln.expand_dims %r {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
  %c16 = arith.constant dense<16> : tensor<16x1xi32>
  %ro = arith.muli %rows, %c16 : tensor<16x1xi32>
  %rb = kiln.broadcast %ro : tensor<16x1xi32> -> tensor<16x16xi32>
  %cb = kiln.broadcast %cols : tensor<1x16xi32> -> tensor<16x16xi32>
  %off = arith.addi %rb, %cb : tensor<16x16xi32>
  %qs = kiln.splat %q : tensor<16x16x!kiln.ptr<f16>>
  %qp = kiln.addptr %qs, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
  %ks = kiln.splat %k : tensor<16x16x!kiln.ptr<f16>>
  %kp = kiln.addptr %ks, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
  %qt = kiln.load %qp : tensor<16x16x!kiln.ptr<f16>>
  %kt = kiln.load %kp : tensor<16x16x!kiln.ptr<f16>>
  %ktt = kiln.trans %kt : tensor<16x16xf16> -> tensor<16x16xf16>
  %z = arith.constant dense<0.0> : tensor<16x16xf32>
  %s = kiln.dot %qt, %ktt, %z : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  %m = kiln.reduce max %s axis 1 : tensor<16x16xf32> -> tensor<16xf32>
  %me = kiln.expand_dims %m {axis = 1 : i32} : tensor<16xf32> -> tensor<16x1xf32>
  %mb = kiln.broadcast %me : tensor<16x1xf32> -> tensor<16x16xf32>
  %d = arith.subf %s, %mb : tensor<16x16xf32>
  %os = kiln.splat %o : tensor<16x16x!kiln.ptr<f32>>
  %op = kiln.addptr %os, %off : tensor<16x16x!kiln.ptr<f32>>, tensor<16x16xi32>
  kiln.store %op, %d : tensor<16x16x!kiln.ptr<f32>>
  return
}

// -----

// A loop-carried tile is carried as the elements each thread holds: the type
// converter turns tensor<64xf32, #blocked> over 32 threads into two f32, so
// the loop has two iteration arguments, both starting from the splat's one
// value, and the addition inside becomes two scalar additions.
// CHECK-LABEL: gpu.func @test_loop_carried
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[SUM:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A0:.*]] = %[[ZERO]], %[[A1:.*]] = %[[ZERO]]) -> (f32, f32)  : i32 {
// CHECK: %[[V:.*]] = scf.if
// CHECK: %[[E0:.*]] = llvm.extractelement %[[V]]
// CHECK: %[[E1:.*]] = llvm.extractelement %[[V]]
// CHECK: %[[N0:.*]] = arith.addf %[[A0]], %[[E0]] : f32
// CHECK: %[[N1:.*]] = arith.addf %[[A1]], %[[E1]] : f32
// CHECK: scf.yield %[[N0]], %[[N1]] : f32, f32
// CHECK: llvm.insertelement %[[SUM]]#0
// CHECK: llvm.insertelement %[[SUM]]#1
func.func @test_loop_carried(%x: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64xf32>
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64xf32>) : i32 {
    %v = kiln.load %p : tensor<64x!kiln.ptr<f32>>
    %next = arith.addf %acc, %v : tensor<64xf32>
    scf.yield %next : tensor<64xf32>
  }
  kiln.store %p, %sum : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

// Programmatic dependent launch: the wait and the trigger are PTX fences for
// every memory access around them (a memory clobber keeps loads of earlier
// kernels' results after the wait), and the kernel records that the runtime
// launches it as the dependent of the kernel before it.
// Before sm_90 kernels are serialised on the stream: both ops lower to
// nothing and nothing is recorded.
// SM80-NOT: griddepcontrol
// SM80-NOT: kiln_dependent_launch
// CHECK: llvm.mlir.global external constant @kiln_dependent_launch(1 : i32)
// CHECK-LABEL: gpu.func @test_grid_dependency
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", "~{memory}"
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: gpu.return
func.func @test_grid_dependency(%w: !kiln.ptr<f32>, %x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  kiln.launch_dependents
  %a = kiln.load %w : !kiln.ptr<f32>
  kiln.grid_dependency_wait
  %b = kiln.load %x : !kiln.ptr<f32>
  %s = arith.addf %a, %b : f32
  kiln.store %y, %s : !kiln.ptr<f32>
  return
}

// -----

// An L2 prefetch per element a thread holds (here two a thread, 64 lines
// apart for 128-byte lines of f16), predicated on the mask where there is
// one; a scalar is prefetched by thread 0 alone. A kernel with only
// prefetches is not a dependent launch.
// CHECK-NOT: @kiln_dependent_launch
// CHECK-LABEL: gpu.func @test_prefetch
// CHECK: llvm.inline_asm has_side_effects "@$1 prefetch.global.L2 [$0];", "l,b" %{{.*}}, %{{.*}} : (i64, i1) -> ()
// CHECK: llvm.inline_asm has_side_effects "@$1 prefetch.global.L2 [$0];", "l,b" %{{.*}}, %{{.*}} : (i64, i1) -> ()
// CHECK-NOT: prefetch.global
// CHECK: llvm.inline_asm has_side_effects "prefetch.global.L2 [$0];", "l" %{{.*}} : (i64) -> ()
// CHECK: llvm.inline_asm has_side_effects "prefetch.global.L2 [$0];", "l" %{{.*}} : (i64) -> ()
// CHECK-NOT: prefetch.global
// CHECK: llvm.inline_asm has_side_effects "@$1 prefetch.global.L2 [$0];", "l,b" %{{.*}}, %{{.*}} : (i64, i1) -> ()
// CHECK-NOT: prefetch.global
// CHECK: gpu.return
// SM80-LABEL: gpu.func @test_prefetch
// SM80: prefetch.global.L2
func.func @test_prefetch(%w: !kiln.ptr<f16>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %c64 = arith.constant 64 : i32
  %line = kiln.splat %c64 : tensor<64xi32>
  %off = arith.muli %r, %line : tensor<64xi32>
  %ns = kiln.splat %n : tensor<64xi32>
  %m = arith.cmpi slt, %off, %ns : tensor<64xi32>
  %ws = kiln.splat %w : tensor<64x!kiln.ptr<f16>>
  %p = kiln.addptr %ws, %off : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  kiln.prefetch %p, %m : tensor<64x!kiln.ptr<f16>>
  kiln.prefetch %p : tensor<64x!kiln.ptr<f16>>
  kiln.prefetch %w : !kiln.ptr<f16>
  return
}

// -----

// An atomic addition per element a thread holds (two a thread here: 64
// elements over 32 lanes), a predicated reduction where there is a mask,
// none that returns a value; a scalar is added by thread 0 alone.
// CHECK-LABEL: gpu.func @test_atomic_accumulate
// CHECK: llvm.inline_asm has_side_effects "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,b,~{memory}"
// CHECK: llvm.inline_asm has_side_effects "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,b,~{memory}"
// CHECK: llvm.inline_asm has_side_effects "red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,~{memory}"
// CHECK: llvm.inline_asm has_side_effects "red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,~{memory}"
// CHECK: llvm.inline_asm has_side_effects "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,b,~{memory}"
// CHECK-NOT: red.
// CHECK-NOT: atom.
// CHECK: gpu.return
func.func @test_atomic_accumulate(%acc: !kiln.ptr<f32>, %n: i32, %x: f32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %ns = kiln.splat %n : tensor<64xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<64xi32>
  %as = kiln.splat %acc : tensor<64x!kiln.ptr<f32>>
  %p = kiln.addptr %as, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = arith.sitofp %r : tensor<64xi32> to tensor<64xf32>
  kiln.atomic_accumulate %p, %v, %m : tensor<64x!kiln.ptr<f32>>
  kiln.atomic_accumulate %p, %v : tensor<64x!kiln.ptr<f32>>
  kiln.atomic_accumulate %acc, %x : !kiln.ptr<f32>
  return
}

// -----

// A kernel without a wait is launched the ordinary way: no record.
// CHECK-NOT: @kiln_dependent_launch
// CHECK-LABEL: gpu.func @test_no_grid_dependency
func.func @test_no_grid_dependency(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %b = kiln.load %x : !kiln.ptr<f32>
  kiln.store %y, %b : !kiln.ptr<f32>
  return
}
