// RUN: kiln-opt %s -split-input-file -kiln-pipeline-loads="num-stages=3 tma=true" -canonicalize | FileCheck %s

// The A operand of a product is a (64 x 64) block of a row-major tensor,
// a[(r0 + i) * lda + k + j], masked by the tensor's extents (M, K): TMA
// copies it. The kernel gets a tensor-map argument describing the tensor by
// its other arguments (base 0, rows 1, columns 2, row stride 3) and a box of
// 64 rows; one barrier per buffer; iterations 0 and 1 are copied before the
// loop (each only when in range); iteration i issues i + 2 after a barrier,
// then waits on barrier i % 3 for phase (i / 3) % 2. No cp.async remains.
// CHECK-LABEL: func.func @test_tma
// CHECK-SAME: %[[MAP:[^:]*]]: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 64, 64>, cols = 2 : i32, rows = 1 : i32, stride = 3 : i32}}
// CHECK: %[[RING:.*]] = kiln.local_alloc : <3x64x64xf16>
// CHECK: %[[BARS:.*]] = kiln.local_alloc : <3x1xi64>
// CHECK: kiln.mbarrier_init %[[BARS]] {arrivals = 1 : i32}
// CHECK: %[[IN0:.*]] = arith.cmpi sgt, %[[K:.*]], %c0_i32
// CHECK: kiln.async_tma_copy %[[MAP]][%[[R0:.*]], %c0_i32], %[[RING]][%c0_i32], %[[BARS]][%c0_i32] if %[[IN0]]
// CHECK-NEXT: kiln.mbarrier_arrive %[[BARS]][%c0_i32] if %[[IN0]]
// CHECK: kiln.async_tma_copy %[[MAP]][%[[R0]], %c64_i32], %[[RING]][%c1_i32], %[[BARS]][%c1_i32]
// CHECK-NEXT: kiln.mbarrier_arrive %[[BARS]][%c1_i32]
// CHECK: scf.for %[[IV:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: %[[I:.*]] = arith.divsi %[[IV]], %c64_i32
// CHECK: %[[STAGE:.*]] = arith.remsi %[[I]], %c3_i32
// CHECK: %[[AHEAD:.*]] = arith.remsi %{{.*}}, %c3_i32
// CHECK: kiln.barrier
// CHECK: %[[NEXT:.*]] = arith.addi %[[IV]], %c128_i32
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[NEXT]], %[[K]]
// CHECK: kiln.async_tma_copy %[[MAP]][%[[R0]], %[[NEXT]]], %[[RING]][%[[AHEAD]]], %[[BARS]][%[[AHEAD]]] if %[[IN]]
// CHECK-NEXT: kiln.mbarrier_arrive %[[BARS]][%[[AHEAD]]] if %[[IN]]
// CHECK: %[[ROUND:.*]] = arith.divsi %[[I]], %c3_i32
// CHECK: %[[PHASE:.*]] = arith.remsi %[[ROUND]], %c2_i32
// CHECK: kiln.mbarrier_wait %[[BARS]][%[[STAGE]]], %[[PHASE]]
// CHECK: %[[T:.*]] = kiln.local_load %[[RING]][%[[STAGE]]]
// CHECK: kiln.dot %[[T]]
// CHECK-NOT: kiln.async_wait
// CHECK-NOT: kiln.async_copy
func.func @test_tma(%a: !kiln.ptr<f16>, %M: i32, %K: i32, %lda: i32) -> tensor<64x64xf32> attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %b = arith.constant dense<1.0> : tensor<64x64xf16>
  %pid = kiln.program_id 0 : i32
  %r0 = arith.muli %pid, %c64 : i32
  %r0s = kiln.splat %r0 : tensor<64xi32>
  %range = kiln.make_range 0 to 64 : tensor<64xi32>
  %rm = arith.addi %r0s, %range : tensor<64xi32>
  %rows = kiln.expand_dims %rm {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %ldas = kiln.splat %lda : tensor<64x1xi32>
  %rowoff = arith.muli %rows, %ldas : tensor<64x1xi32>
  %rowoffb = kiln.broadcast %rowoff : tensor<64x1xi32> -> tensor<64x64xi32>
  %Ms = kiln.splat %M : tensor<64x1xi32>
  %rowmask = arith.cmpi slt, %rows, %Ms : tensor<64x1xi32>
  %rowmaskb = kiln.broadcast %rowmask : tensor<64x1xi1> -> tensor<64x64xi1>
  %pa = kiln.splat %a : tensor<64x64x!kiln.ptr<f16>>
  %Ks = kiln.splat %K : tensor<1x64xi32>
  %res = scf.for %k = %c0 to %K step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %ks = kiln.splat %k : tensor<64xi32>
    %kr = arith.addi %ks, %range : tensor<64xi32>
    %ka = kiln.expand_dims %kr {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %kab = kiln.broadcast %ka : tensor<1x64xi32> -> tensor<64x64xi32>
    %off = arith.addi %rowoffb, %kab : tensor<64x64xi32>
    %p = kiln.addptr %pa, %off : tensor<64x64x!kiln.ptr<f16>>, tensor<64x64xi32>
    %kmask = arith.cmpi slt, %ka, %Ks : tensor<1x64xi32>
    %kmaskb = kiln.broadcast %kmask : tensor<1x64xi1> -> tensor<64x64xi1>
    %m = arith.andi %rowmaskb, %kmaskb : tensor<64x64xi1>
    %zf = arith.constant dense<0.0> : tensor<64x64xf16>
    %t = kiln.load %p, %m, %zf : tensor<64x64x!kiln.ptr<f16>>
    %d = kiln.dot %t, %b, %acc : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %res : tensor<64x64xf32>
}

// -----

// A mask that is not the tensor's extents (here the rows are bounded by a
// value the kernel computes) keeps the load on cp.async.
// CHECK-LABEL: func.func @test_not_extents
// CHECK-NOT: kiln.tensormap
// CHECK-NOT: kiln.async_tma_copy
// CHECK: kiln.async_copy
func.func @test_not_extents(%a: !kiln.ptr<f16>, %M: i32, %K: i32, %lda: i32) -> tensor<64x64xf32> attributes {kiln.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %b = arith.constant dense<1.0> : tensor<64x64xf16>
  %range = kiln.make_range 0 to 64 : tensor<64xi32>
  %rows = kiln.expand_dims %range {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %ldas = kiln.splat %lda : tensor<64x1xi32>
  %rowoff = arith.muli %rows, %ldas : tensor<64x1xi32>
  %rowoffb = kiln.broadcast %rowoff : tensor<64x1xi32> -> tensor<64x64xi32>
  %half = arith.subi %M, %c1 : i32
  %Ms = kiln.splat %half : tensor<64x1xi32>
  %rowmask = arith.cmpi slt, %rows, %Ms : tensor<64x1xi32>
  %rowmaskb = kiln.broadcast %rowmask : tensor<64x1xi1> -> tensor<64x64xi1>
  %pa = kiln.splat %a : tensor<64x64x!kiln.ptr<f16>>
  %Ks = kiln.splat %K : tensor<1x64xi32>
  %res = scf.for %k = %c0 to %K step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %ks = kiln.splat %k : tensor<64xi32>
    %kr = arith.addi %ks, %range : tensor<64xi32>
    %ka = kiln.expand_dims %kr {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %kab = kiln.broadcast %ka : tensor<1x64xi32> -> tensor<64x64xi32>
    %off = arith.addi %rowoffb, %kab : tensor<64x64xi32>
    %p = kiln.addptr %pa, %off : tensor<64x64x!kiln.ptr<f16>>, tensor<64x64xi32>
    %kmask = arith.cmpi slt, %ka, %Ks : tensor<1x64xi32>
    %kmaskb = kiln.broadcast %kmask : tensor<1x64xi1> -> tensor<64x64xi1>
    %m = arith.andi %rowmaskb, %kmaskb : tensor<64x64xi1>
    %t = kiln.load %p, %m : tensor<64x64x!kiln.ptr<f16>>
    %d = kiln.dot %t, %b, %acc : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %res : tensor<64x64xf32>
}
