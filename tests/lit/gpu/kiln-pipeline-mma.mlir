// RUN: kiln-opt %s -split-input-file -kiln-pipeline-mma | FileCheck %s

// The loop's one product is on wgmma and its accumulator is only carried by
// the loop: the product becomes async, the previous iteration's product is
// waited for (with a barrier) before the copies that overwrite its buffer,
// and the loop's result is waited for after the loop.
// CHECK-LABEL: func.func @test_async_wgmma
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: kiln.async_wait {pending = 1 : i32}
// CHECK-NEXT: %[[A:.*]] = kiln.local_load
// CHECK-NEXT: %[[B:.*]] = kiln.local_load
// CHECK-NEXT: %[[D:.*]] = kiln.dot %[[A]], %[[B]], %[[ACC]] {async}
// CHECK-NEXT: %[[W:.*]] = kiln.dot_wait %[[D]] {pendings = 1 : i32, sync}
// CHECK-NEXT: kiln.async_copy
// CHECK-NEXT: kiln.async_copy
// CHECK-NEXT: kiln.async_commit
// CHECK-NEXT: scf.yield %[[W]]
// CHECK: %[[DONE:.*]] = kiln.dot_wait %[[R]] {pendings = 0 : i32}
// CHECK: return %[[DONE]]
#s = #kiln.shared<swizzle = true, transposed = false, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
#b = #kiln.blocked<vec = 8, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_async_wgmma(%pa: tensor<128x64x!kiln.ptr<f16>, #b>, %pb: tensor<64x128x!kiln.ptr<f16>, #b>,
                              %init: tensor<128x128xf32, #mma>, %n: i32) -> tensor<128x128xf32, #mma> attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c3 = arith.constant 3 : i32
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x64x128xf16>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<128x128xf32, #mma>) : i32 {
      %s = arith.remsi %i, %c3 : i32
      kiln.async_wait {pending = 1 : i32}
      kiln.async_copy %pa, %ra[%s] : tensor<128x64x!kiln.ptr<f16>, #b>, !kiln.shared<3x128x64xf16>
      kiln.async_copy %pb, %rb[%s] : tensor<64x128x!kiln.ptr<f16>, #b>, !kiln.shared<3x64x128xf16>
      kiln.async_commit
      %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #s>
      %bm = kiln.local_load %rb[%s] : !kiln.shared<3x64x128xf16> -> tensor<64x128xf16, #s>
      %d = kiln.dot %a, %bm, %acc : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    }
    return %r : tensor<128x128xf32, #mma>
  }
}

// -----

// mma.sync products (version 2) and accumulators used inside the loop stay
// synchronous.
// CHECK-LABEL: func.func @test_not_async
// CHECK-NOT: async}
// CHECK-NOT: kiln.dot_wait
#s = #kiln.shared<swizzle = true, transposed = false, warps = 8>
#mma2 = #kiln.mma<version = 2, warpsM = 2, warpsN = 4>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_not_async(%a: tensor<128x64xf16, #s>, %bm: tensor<64x128xf16, #s>, %init2: tensor<128x128xf32, #mma2>,
                            %init: tensor<128x128xf32, #mma>, %n: i32) -> (tensor<128x128xf32, #mma2>, tensor<128x128xf32, #mma>) attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init2) -> (tensor<128x128xf32, #mma2>) : i32 {
      %d = kiln.dot %a, %bm, %acc : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma2>
      scf.yield %d : tensor<128x128xf32, #mma2>
    }
    %q = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<128x128xf32, #mma>) : i32 {
      %d = kiln.dot %a, %bm, %acc : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma>
      %e = arith.addf %d, %d : tensor<128x128xf32, #mma>
      scf.yield %e : tensor<128x128xf32, #mma>
    }
    return %r, %q : tensor<128x128xf32, #mma2>, tensor<128x128xf32, #mma>
  }
}

// -----

// With TMA, the copies of an iteration and their barrier arrival move after
// the synchronising wait, which replaces the barrier that guarded them.
// CHECK-LABEL: func.func @test_async_wgmma_tma
// CHECK: scf.for
// CHECK-NOT: kiln.barrier
// CHECK: kiln.mbarrier_wait
// CHECK: kiln.dot {{.*}} {async}
// CHECK-NEXT: %[[W:.*]] = kiln.dot_wait %{{.*}} {pendings = 1 : i32, sync}
// CHECK-NEXT: kiln.async_tma_copy
// CHECK-NEXT: kiln.async_tma_copy
// CHECK-NEXT: kiln.mbarrier_arrive
// CHECK-NEXT: scf.yield %[[W]]
#s = #kiln.shared<swizzle = true, transposed = false, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_async_wgmma_tma(%ma: !kiln.tensormap, %mb: !kiln.tensormap, %init: tensor<128x128xf32, #mma>,
                                  %n: i32) -> tensor<128x128xf32, #mma> attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c3 = arith.constant 3 : i32
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x64x128xf16>
    %bars = kiln.local_alloc : !kiln.shared<3x1xi64>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<128x128xf32, #mma>) : i32 {
      %s = arith.remsi %i, %c3 : i32
      kiln.barrier
      kiln.async_tma_copy %ma[%c0, %i], %ra[%s], %bars[%s] : !kiln.shared<3x128x64xf16>, !kiln.shared<3x1xi64>
      kiln.async_tma_copy %mb[%i, %c0], %rb[%s], %bars[%s] : !kiln.shared<3x64x128xf16>, !kiln.shared<3x1xi64>
      kiln.mbarrier_arrive %bars[%s] : !kiln.shared<3x1xi64>
      kiln.mbarrier_wait %bars[%s], %c0 : !kiln.shared<3x1xi64>
      %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #s>
      %bm = kiln.local_load %rb[%s] : !kiln.shared<3x64x128xf16> -> tensor<64x128xf16, #s>
      %d = kiln.dot %a, %bm, %acc : tensor<128x64xf16, #s>, tensor<64x128xf16, #s> -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    }
    return %r : tensor<128x128xf32, #mma>
  }
}

// -----

// Two products read in place (A from a ring or from registers, B from a
// ring), each needed only at the end of the iteration: both are issued
// asynchronously, the element-wise work after each runs while it is in
// flight, and the waits before the yield count the products issued after
// theirs.
// CHECK-LABEL: func.func @test_overlap_following_work
// CHECK: scf.for
// CHECK: %[[S:.*]] = kiln.dot %{{.*}}, %{{.*}}, %{{.*}} {async}
// CHECK-NEXT: math.exp2
// CHECK: %[[O:.*]] = kiln.dot %{{.*}}, %{{.*}}, %{{.*}} {async}
// CHECK-NEXT: %[[L:.*]] = arith.addf
// CHECK-NEXT: %[[WS:.*]] = kiln.dot_wait %[[S]] {pendings = 1 : i32}
// CHECK-NEXT: %[[WO:.*]] = kiln.dot_wait %[[O]] {pendings = 0 : i32}
// CHECK-NEXT: scf.yield %[[WO]], %[[WS]], %[[L]]
#s = #kiln.shared<swizzle = true, transposed = false, warps = 4>
#st = #kiln.shared<swizzle = true, transposed = true, warps = 4>
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
#a = #kiln.dot_operand<index = 0, parent = #mma>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_overlap_following_work(%o0: tensor<64x64xf32, #mma>, %s0: tensor<64x64xf32, #mma>,
                                         %n: i32) -> tensor<64x64xf32, #mma> attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %zero = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
    %rq = kiln.local_alloc : !kiln.shared<1x64x64xf16>
    %rk = kiln.local_alloc : !kiln.shared<2x64x64xf16>
    %rv = kiln.local_alloc : !kiln.shared<2x64x64xf16>
    %q = kiln.local_load %rq[%c0] : !kiln.shared<1x64x64xf16> -> tensor<64x64xf16, #s>
    %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%o = %o0, %sc = %s0, %l = %s0) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>) : i32 {
      %st = arith.remsi %i, %c2 : i32
      %k = kiln.local_load %rk[%st] : !kiln.shared<2x64x64xf16> -> tensor<64x64xf16, #s>
      %kt = kiln.trans %k : tensor<64x64xf16, #s> -> tensor<64x64xf16, #st>
      %next = kiln.dot %q, %kt, %zero : tensor<64x64xf16, #s>, tensor<64x64xf16, #st> -> tensor<64x64xf32, #mma>
      %p = math.exp2 %sc : tensor<64x64xf32, #mma>
      %ph = kiln.cast %p : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %pa = kiln.convert_layout %ph : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
      %v = kiln.local_load %rv[%st] : !kiln.shared<2x64x64xf16> -> tensor<64x64xf16, #s>
      %on = kiln.dot %pa, %v, %o : tensor<64x64xf16, #a>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
      %ln = arith.addf %l, %p : tensor<64x64xf32, #mma>
      scf.yield %on, %next, %ln : tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>
    }
    return %r#0 : tensor<64x64xf32, #mma>
  }
}

// -----

// A product whose result is used at once, one whose operand is staged in
// scratch (a register tile converted to shared memory: the area is reused),
// and one with a copy into shared memory before its first use stay
// synchronous.
// CHECK-LABEL: func.func @test_no_overlap
// CHECK-NOT: async}
// CHECK-NOT: kiln.dot_wait
#s = #kiln.shared<swizzle = true, transposed = false, warps = 4>
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
#b = #kiln.blocked<vec = 8, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_no_overlap(%x: tensor<64x64xf16, #b>, %p: tensor<64x64x!kiln.ptr<f16>, #b>,
                             %acc: tensor<64x64xf32, #mma>) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>) attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %ring = kiln.local_alloc : !kiln.shared<2x64x64xf16>
    %q = kiln.local_load %ring[%c1] : !kiln.shared<2x64x64xf16> -> tensor<64x64xf16, #s>
    %v = kiln.local_load %ring[%c0] : !kiln.shared<2x64x64xf16> -> tensor<64x64xf16, #s>
    %d0 = kiln.dot %q, %v, %acc : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
    %e0 = arith.addf %d0, %d0 : tensor<64x64xf32, #mma>
    %xs = kiln.convert_layout %x : tensor<64x64xf16, #b> -> tensor<64x64xf16, #s>
    %d1 = kiln.dot %q, %xs, %acc : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
    %e1 = arith.addf %acc, %acc : tensor<64x64xf32, #mma>
    %f1 = arith.addf %d1, %e1 : tensor<64x64xf32, #mma>
    %d2 = kiln.dot %q, %v, %acc : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
    kiln.async_copy %p, %ring[%c1] : tensor<64x64x!kiln.ptr<f16>, #b>, !kiln.shared<2x64x64xf16>
    %f2 = arith.addf %d2, %d2 : tensor<64x64xf32, #mma>
    return %e0, %f1, %f2 : tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>
  }
}
