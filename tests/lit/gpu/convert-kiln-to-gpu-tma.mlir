// RUN: kiln-opt %s -split-input-file -convert-kiln-to-gpu="num-warps=4" | FileCheck %s

// TMA copies and shared-memory barriers. The tensor-map argument becomes a
// pointer (the parameter's address; the LLVM translation passes it by
// value, __grid_constant__), listed in kiln.tensormap_args, and the global
// kiln_tensormaps tells the runtime how to encode it: one map, argument 4,
// base 0, rows 1, columns 2, stride 3, box 64x64, f16. Thread 0 initialises
// the barriers (at byte 0; the 1024-aligned rings follow), then the program
// synchronises. A copy of a 64x128 tile is one expect-tx of its 16 KB and
// two bulk tensor copies (columns c and c + 64, into the two 8 KB panels of
// buffer 1), all by thread 0 where the guard holds; every thread waits on
// the barrier's phase parity in a try_wait loop.
// CHECK-LABEL: gpu.module @test_tma_lowering_module
// CHECK: llvm.mlir.global external constant @kiln_tensormaps(dense<[1, 4, 0, 1, 2, 3, 64, 64, 0]> : tensor<9xi32>)
// CHECK: gpu.func @test_tma_lowering(%{{.*}}: i64, %{{.*}}: i32, %[[K:.*]]: i32, %{{.*}}: i32, %[[MAP:.*]]: !llvm.ptr) kernel attributes {kiln.tensormap_args = array<i32: 4>
// CHECK: %[[TID:.*]] = arith.index_cast
// CHECK: arith.constant 1024 : i32
// CHECK: scf.if
// CHECK-COUNT-2: mbarrier.init.shared::cta.b64 [$0], $1;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]]
// CHECK: %[[PRED:.*]] = arith.andi %[[FIRST]], %true
// CHECK: %[[BAR:.*]] = llvm.ptrtoint
// CHECK: "@$1 mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], 16384;", "r,b" %[[BAR]], %[[PRED]]
// CHECK: %[[X0:.*]] = arith.addi %[[K]], %c0_i32
// CHECK: "@$5 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r,b" %{{.*}}, %[[MAP]], %[[X0]], %c64_i32, %[[BAR]], %[[PRED]]
// CHECK: %[[P1:.*]] = arith.addi %{{.*}}, %c8192_i32
// CHECK: %[[X1:.*]] = arith.addi %[[K]], %c64_i32
// CHECK: cp.async.bulk.tensor.2d{{.*}}%[[P1]], %[[MAP]], %[[X1]], %c64_i32, %[[BAR]], %[[PRED]]
// CHECK: "@$1 mbarrier.arrive.shared::cta.b64 _, [$0];"
// CHECK: gpu.barrier
// CHECK: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_tma_lowering(%a: !kiln.ptr<f16>, %M: i32, %K: i32, %lda: i32,
                               %map: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 64, 64>, cols = 2 : i32, rows = 1 : i32, stride = 3 : i32}})
      attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %row = arith.constant 64 : i32
    %true = arith.constant true
    %ring = kiln.local_alloc : !kiln.shared<2x64x128xf16>
    %bars = kiln.local_alloc : !kiln.shared<2x1xi64>
    kiln.mbarrier_init %bars {arrivals = 1 : i32} : !kiln.shared<2x1xi64>
    kiln.async_tma_copy %map[%row, %K], %ring[%c1], %bars[%c1] if %true : !kiln.shared<2x64x128xf16>, !kiln.shared<2x1xi64>
    kiln.mbarrier_arrive %bars[%c1] : !kiln.shared<2x1xi64>
    kiln.barrier
    kiln.mbarrier_wait %bars[%c1], %c0 : !kiln.shared<2x1xi64>
    return
  }
}

// -----

// A TMA store of a (64 x 128) f16 accumulator tile: each thread writes its
// column pairs into shared memory in the 128-byte swizzle (at the 1024-byte
// aligned start of the scratch area), fences them for the async proxy and
// the program synchronises; thread 0 copies the two 8 KB panels to columns
// c and c + 64 of row r, commits them as one group and waits until they
// have been read. Nothing follows in the kernel: no barrier after it.
// CHECK-LABEL: gpu.module @test_tma_store_module
// CHECK: llvm.mlir.global external constant @kiln_tensormaps(dense<[1, 5, 0, 1, 2, 3, 64, 64, 0]> : tensor<9xi32>)
// CHECK: gpu.func @test_tma_store(%{{.*}}: i64, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i64, %[[MAP:.*]]: !llvm.ptr, %[[R:.*]]: i32, %[[C:.*]]: i32)
// CHECK-COUNT-32: llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<3>
// CHECK-NOT: llvm.store
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq
// CHECK: %[[BUF:.*]] = llvm.ptrtoint
// CHECK: %[[P0:.*]] = arith.addi %[[BUF]], %c0_i32{{.*}}
// CHECK: %[[X0:.*]] = arith.addi %[[C]], %c0_i32{{.*}}
// CHECK: "@$4 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", "l,r,r,r,b" %[[MAP]], %[[X0]], %[[R]], %[[P0]], %[[FIRST]]
// CHECK: %[[P1:.*]] = arith.addi %[[BUF]], %c8192_i32
// CHECK: %[[X1:.*]] = arith.addi %[[C]], %c64_i32{{.*}}
// CHECK: "@$4 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", "l,r,r,r,b" %[[MAP]], %[[X1]], %[[R]], %[[P1]], %[[FIRST]]
// CHECK-NEXT: "@$0 cp.async.bulk.commit_group;", "b" %[[FIRST]]
// CHECK-NEXT: "@$0 cp.async.bulk.wait_group.read 0;", "b" %[[FIRST]]
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
#cols = #kiln.slice<dim = 0, parent = #mma>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_tma_store(%c: !kiln.ptr<f16>, %M: i32, %N: i32, %ldc: i32, %x: !kiln.ptr<f16>,
                            %map: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 64, 64>, cols = 2 : i32, rows = 1 : i32, stride = 3 : i32}},
                            %r: i32, %col: i32)
      attributes {kiln.kernel} {
    %rn = kiln.make_range 0 to 128 : tensor<128xi32, #cols>
    %ec = kiln.expand_dims %rn {axis = 0 : i32} : tensor<128xi32, #cols> -> tensor<1x128xi32, #cols>
    %off = kiln.broadcast %ec : tensor<1x128xi32, #cols> -> tensor<64x128xi32, #mma>
    %xs = kiln.splat %x : tensor<64x128x!kiln.ptr<f16>, #mma>
    %xp = kiln.addptr %xs, %off : tensor<64x128x!kiln.ptr<f16>, #mma>, tensor<64x128xi32, #mma>
    %acc = kiln.load %xp : tensor<64x128x!kiln.ptr<f16>, #mma>
    kiln.tma_store %acc, %map[%r, %col] : tensor<64x128xf16, #mma>
    return
  }
}
