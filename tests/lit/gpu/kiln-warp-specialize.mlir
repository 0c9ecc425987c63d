// RUN: kiln-opt %s -split-input-file -kiln-warp-specialize -canonicalize -cse | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-warp-specialize=persistent=true -canonicalize -cse | FileCheck %s --check-prefix=PERSIST

// A TMA loop as kiln-pipeline-loads and kiln-pipeline-mma leave it (three
// ring buffers, copies two iterations ahead, the product in flight across
// iterations). The rings and barriers come first, with an "empty" barrier
// per buffer counting one arrival per consumer warp; a producer warpgroup
// (next to two consumer warpgroups) waits until buffer g % 3 is empty
// (parity (g / 3 + 1) % 2: the first pass does not wait), copies
// iteration g's tiles into it and arrives on "full". The consumers lose
// the prologue's and the loop's copies and the barrier after each product;
// each warp arrives on the previous buffer's "empty" barrier after the
// wait, and on the last buffer's after the loop.
// CHECK-LABEL: func.func @test_producer_warp
// CHECK-SAME: %[[K:[^:]*]]: i32, %[[MA:[^:]*]]: !kiln.tensormap
// CHECK-SAME: %[[MB:[^:]*]]: !kiln.tensormap
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i32
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i32
// CHECK: %[[RA:.*]] = kiln.local_alloc : <3x128x64xf16>
// CHECK-NEXT: %[[RB:.*]] = kiln.local_alloc : <3x64x128xf16>
// CHECK-NEXT: %[[FULL:.*]] = kiln.local_alloc : <3x1xi64>
// CHECK-NEXT: kiln.mbarrier_init %[[FULL]] {arrivals = 1 : i32}
// CHECK-NEXT: %[[EMPTY:.*]] = kiln.local_alloc : <3x1xi64>
// CHECK-NEXT: kiln.mbarrier_init %[[EMPTY]] {arrivals = 8 : i32}
// CHECK-NEXT: kiln.producer warps(4) {
// CHECK: %[[PID:.*]] = kiln.program_id 0
// CHECK: %[[ROW:.*]] = arith.muli %[[PID]]
// CHECK: scf.for %[[PK:.*]] = %[[C0]] to %[[K]] step %[[C64]] : i32 {
// CHECK-NEXT: %[[G:.*]] = arith.divsi %[[PK]], %[[C64]]
// CHECK-NEXT: %[[S:.*]] = arith.remsi %[[G]], %[[C3]]
// CHECK-NEXT: %[[Q:.*]] = arith.divsi %[[G]], %[[C3]]
// CHECK-NEXT: %[[Q1:.*]] = arith.addi %[[Q]], %[[C1]]
// CHECK-NEXT: %[[FREE:.*]] = arith.remsi %[[Q1]], %[[C2]]
// CHECK-NEXT: kiln.mbarrier_wait %[[EMPTY]][%[[S]]], %[[FREE]]
// CHECK-NEXT: kiln.async_tma_copy %[[MA]][%[[ROW]], %[[PK]]], %[[RA]][%[[S]]], %[[FULL]][%[[S]]] :
// CHECK-NEXT: kiln.async_tma_copy %[[MB]][%[[PK]], %[[C0]]], %[[RB]][%[[S]]], %[[FULL]][%[[S]]] :
// CHECK-NEXT: kiln.mbarrier_arrive %[[FULL]][%[[S]]] :
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT: kiln.async_tma_copy
// CHECK: %[[R:.*]] = scf.for %[[IV:[^ ]*]] = %[[C0]] to %[[K]] step %[[C64]]
// CHECK: %[[I:.*]] = arith.divsi %[[IV]], %[[C64]]
// CHECK: kiln.mbarrier_wait %[[FULL]]
// CHECK: kiln.dot {{.*}} {async}
// CHECK-NEXT: %[[W:.*]] = kiln.dot_wait %{{.*}} {pendings = 1 : i32} :
// CHECK-NEXT: %[[IP:.*]] = arith.addi %[[I]], %[[C2]]
// CHECK-NEXT: %[[PREV:.*]] = arith.remsi %[[IP]], %[[C3]]
// CHECK-NEXT: %[[NOTFIRST:.*]] = arith.cmpi sgt, %[[I]], %[[C0]]
// CHECK-NEXT: kiln.mbarrier_arrive %[[EMPTY]][%[[PREV]]] if %[[NOTFIRST]] {per_warp}
// CHECK-NOT: kiln.async_tma_copy
// CHECK: scf.yield %[[W]]
// CHECK: kiln.dot_wait %[[R]] {pendings = 0 : i32}
// CHECK: kiln.mbarrier_arrive %[[EMPTY]][%{{.*}}] if %{{.*}} {per_warp}
// CHECK-NOT: kiln.barrier

// Persistent: three arguments receive the launch's grid, the programs loop
// over its tiles (x fastest), and the ring's iterations are counted across
// tiles: the consumer's buffer and phase are (base + i) % 3 and
// ((base + i) / 3) % 2, and each tile adds the loop's trip count to base.
// PERSIST-LABEL: func.func @test_producer_warp
// PERSIST-SAME: %[[GX:[^:]*]]: i32, %[[GY:[^:]*]]: i32, %[[GZ:[^:]*]]: i32) attributes {kiln.kernel, kiln.virtual_grid = 4 : i32}
// PERSIST: kiln.mbarrier_init %{{.*}} {arrivals = 1 : i32}
// PERSIST-NEXT: %[[EMPTY:.*]] = kiln.local_alloc : <3x1xi64>
// PERSIST: %[[P:.*]] = kiln.program_id 0
// PERSIST-NEXT: %[[NP:.*]] = kiln.num_programs 0
// PERSIST-NEXT: %[[XY:.*]] = arith.muli %[[GX]], %[[GY]]
// PERSIST-NEXT: %[[TOTAL:.*]] = arith.muli %[[XY]], %[[GZ]]
// PERSIST-NEXT: kiln.producer warps(4) {
// PERSIST-NEXT: scf.for %[[PT:.*]] = %[[P]] to %[[TOTAL]] step %[[NP]] iter_args(%[[PBASE:.*]] = %{{.*}}) -> (i32)
// PERSIST: arith.remsi %[[PT]], %[[GX]]
// PERSIST: scf.for
// PERSIST: arith.addi %[[PBASE]]
// PERSIST: kiln.mbarrier_wait %[[EMPTY]]
// PERSIST: scf.yield
// PERSIST: scf.for %[[T:.*]] = %[[P]] to %[[TOTAL]] step %[[NP]] iter_args(%[[BASE:.*]] = %{{.*}}) -> (i32)
// PERSIST-NOT: kiln.program_id
// PERSIST: scf.for %[[IV:[^ ]*]] =
// PERSIST: %[[I:.*]] = arith.divsi %[[IV]]
// PERSIST-NEXT: %[[G:.*]] = arith.addi %[[BASE]], %[[I]]
// PERSIST-NEXT: %[[S:.*]] = arith.remsi %[[G]]
// PERSIST-NEXT: %[[Q:.*]] = arith.divsi %[[G]]
// PERSIST-NEXT: %[[PH:.*]] = arith.remsi %[[Q]]
// PERSIST-NEXT: kiln.mbarrier_wait %{{.*}}[%[[S]]], %[[PH]]
// PERSIST: kiln.mbarrier_arrive %[[EMPTY]]{{.*}} {per_warp}
// PERSIST: scf.yield
// PERSIST: kiln.mbarrier_arrive %[[EMPTY]]{{.*}} {per_warp}
// PERSIST: kiln.store
// PERSIST: scf.yield
#s = #kiln.shared<swizzle = true, transposed = false, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_producer_warp(%out: tensor<128x128x!kiln.ptr<f32>, #mma>, %K: i32,
      %ma: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 128, 64>, cols = 0 : i32, rows = 0 : i32, stride = 0 : i32}},
      %mb: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 64, 64>, cols = 0 : i32, rows = 0 : i32, stride = 0 : i32}})
      attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %c3 = arith.constant 3 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    %pid = kiln.program_id 0 : i32
    %row = arith.muli %pid, %c128 : i32
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x64x128xf16>
    %full = kiln.local_alloc : !kiln.shared<3x1xi64>
    kiln.mbarrier_init %full {arrivals = 1 : i32} : !kiln.shared<3x1xi64>
    %p0 = arith.cmpi sgt, %K, %c0 : i32
    kiln.async_tma_copy %ma[%row, %c0], %ra[%c0], %full[%c0] if %p0 : !kiln.shared<3x128x64xf16>, !kiln.shared<3x1xi64>
    kiln.async_tma_copy %mb[%c0, %c0], %rb[%c0], %full[%c0] if %p0 : !kiln.shared<3x64x128xf16>, !kiln.shared<3x1xi64>
    kiln.mbarrier_arrive %full[%c0] if %p0 : !kiln.shared<3x1xi64>
    %r = scf.for %k = %c0 to %K step %c64 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %i = arith.divsi %k, %c64 : i32
      %s = arith.remsi %i, %c3 : i32
      %i2 = arith.addi %i, %c2 : i32
      %ahead = arith.remsi %i2, %c3 : i32
      %k2 = arith.addi %k, %c128 : i32
      %in = arith.cmpi slt, %k2, %K : i32
      %q = arith.divsi %i, %c3 : i32
      %ph = arith.remsi %q, %c2 : i32
      kiln.mbarrier_wait %full[%s], %ph : !kiln.shared<3x1xi64>
      %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #s>
      %b = kiln.local_load %rb[%s] : !kiln.shared<3x64x128xf16> -> tensor<64x128xf16, #s>
      %d = kiln.dot %a, %b, %acc {async} : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma>
      %w = kiln.dot_wait %d {pendings = 1 : i32, sync} : tensor<128x128xf32, #mma>
      kiln.async_tma_copy %ma[%row, %k2], %ra[%ahead], %full[%ahead] if %in : !kiln.shared<3x128x64xf16>, !kiln.shared<3x1xi64>
      kiln.async_tma_copy %mb[%k2, %c0], %rb[%ahead], %full[%ahead] if %in : !kiln.shared<3x64x128xf16>, !kiln.shared<3x1xi64>
      kiln.mbarrier_arrive %full[%ahead] if %in : !kiln.shared<3x1xi64>
      scf.yield %w : tensor<128x128xf32, #mma>
    }
    %done = kiln.dot_wait %r {pendings = 0 : i32} : tensor<128x128xf32, #mma>
    kiln.store %out, %done : tensor<128x128x!kiln.ptr<f32>, #mma>
    return
  }
}

// -----

// Copies by cp.async (every thread copies) stay with the program: no producer.
// CHECK-LABEL: func.func @test_cp_async_stays
// CHECK-NOT: kiln.producer
// CHECK: kiln.dot_wait %{{.*}} {pendings = 1 : i32, sync}
// PERSIST-LABEL: func.func @test_cp_async_stays
// PERSIST-NOT: kiln.virtual_grid
// PERSIST-NOT: kiln.producer
#s = #kiln.shared<swizzle = true, transposed = false, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
#b = #kiln.blocked<vec = 8, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_cp_async_stays(%pa: tensor<128x64x!kiln.ptr<f16>, #b>, %pb: tensor<64x128x!kiln.ptr<f16>, #b>,
                                 %init: tensor<128x128xf32, #mma>, %n: i32) -> tensor<128x128xf32, #mma> attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c3 = arith.constant 3 : i32
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x64x128xf16>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<128x128xf32, #mma>) : i32 {
      %s = arith.remsi %i, %c3 : i32
      kiln.async_wait {pending = 1 : i32}
      %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #s>
      %bm = kiln.local_load %rb[%s] : !kiln.shared<3x64x128xf16> -> tensor<64x128xf16, #s>
      %d = kiln.dot %a, %bm, %acc {async} : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma>
      %w = kiln.dot_wait %d {pendings = 1 : i32, sync} : tensor<128x128xf32, #mma>
      kiln.async_copy %pa, %ra[%s] : tensor<128x64x!kiln.ptr<f16>, #b>, !kiln.shared<3x128x64xf16>
      kiln.async_copy %pb, %rb[%s] : tensor<64x128x!kiln.ptr<f16>, #b>, !kiln.shared<3x64x128xf16>
      kiln.async_commit
      scf.yield %w : tensor<128x128xf32, #mma>
    }
    %done = kiln.dot_wait %r {pendings = 0 : i32} : tensor<128x128xf32, #mma>
    return %done : tensor<128x128xf32, #mma>
  }
}
