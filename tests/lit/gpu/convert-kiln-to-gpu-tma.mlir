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
