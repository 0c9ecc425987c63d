// RUN: kiln-opt %s -convert-kiln-to-gpu="num-warps=8" | FileCheck %s

// A kiln.producer next to 8 warps: the CTA has 384 threads (kiln_threads
// tells the runtime), the barriers are initialised by thread 0 and every
// thread synchronises (bar.sync 0) before the split; threads 256 and up run
// the producer's body after giving up registers (setmaxnreg.dec 40), with
// thread 256 issuing the copies and arrivals; the others take the registers
// (setmaxnreg.inc 232), synchronise among themselves only (named barrier 1,
// 256 threads) and arrive once per warp (lane 0). A persistent kernel
// (kiln.virtual_grid) gets kiln_virtual_grid, and its consumers read their
// thread index afresh in each tile. A TMA store in the consumers' loop is
// issued by consumer thread 0 (not by the producer's first thread), and the
// consumers synchronise after it: the next tile reuses its buffer.
// CHECK: llvm.mlir.global external constant @kiln_virtual_grid(3 : i32)
// CHECK: llvm.mlir.global external constant @kiln_threads(384 : i32)
// CHECK: gpu.func @test_producer_lowering({{.*}}) kernel attributes {kiln.maxnreg = 168 : i32, {{.*}}known_block_size = array<i32: 384, 1, 1>}
// CHECK: %[[TID:.*]] = arith.index_cast %thread_id_x
// CHECK: mbarrier.init.shared::cta.b64 [$0], $1;", "r,r" %{{.*}}, %c1_i32
// CHECK: gpu.barrier
// CHECK: mbarrier.init.shared::cta.b64 [$0], $1;", "r,r" %{{.*}}, %c8_i32
// CHECK: gpu.barrier
// CHECK: %[[C256:.*]] = arith.constant 256 : i32
// CHECK: %[[ISP:.*]] = arith.cmpi uge, %[[TID]], %[[C256]]
// CHECK: scf.if %[[ISP]] {
// CHECK-NEXT: nvvm.setmaxregister  decrease 40
// CHECK: mbarrier.try_wait.parity
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}}
// CHECK: mbarrier.expect_tx{{.*}}%[[FIRST]]
// CHECK: cp.async.bulk.tensor.2d
// CHECK: mbarrier.arrive.shared::cta.b64
// CHECK: } else {
// CHECK-NEXT: nvvm.setmaxregister  increase 232
// CHECK-NEXT: scf.for
// CHECK-NEXT: %[[OWN:.*]] = llvm.inline_asm has_side_effects "mov.u32 $0, %tid.x;", "=r"
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %[[OWN]], %[[C32]]
// CHECK: mbarrier.try_wait.parity
// CHECK: %[[ID:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[N:.*]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[N]]
// CHECK-NOT: gpu.barrier
// CHECK: %[[L0:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}}
// CHECK: "@$1 mbarrier.arrive.shared::cta.b64 _, [$0];", "r,b" %{{.*}}, %[[L0]]
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK: %[[STORER:.*]] = arith.cmpi eq, %[[OWN]], %c0_i32
// CHECK: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group{{.*}}%[[STORER]]
// CHECK: cp.async.bulk.wait_group.read 0;", "b" %[[STORER]]
// CHECK-NEXT: %{{.*}} = arith.constant 1 : i32
// CHECK-NEXT: %{{.*}} = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier
// CHECK: } {kiln.producer_branch}
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
#cols = #kiln.slice<dim = 0, parent = #mma>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_producer_lowering(%a: !kiln.ptr<f16>, %K: i32,
      %map: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 64, 64>, cols = 1 : i32, rows = 1 : i32, stride = 1 : i32}},
      %gx: i32, %gy: i32, %gz: i32)
      attributes {kiln.kernel, kiln.virtual_grid = 3 : i32} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %ring = kiln.local_alloc : !kiln.shared<2x64x64xf16>
    %full = kiln.local_alloc : !kiln.shared<2x1xi64>
    kiln.mbarrier_init %full {arrivals = 1 : i32} : !kiln.shared<2x1xi64>
    %empty = kiln.local_alloc : !kiln.shared<2x1xi64>
    kiln.mbarrier_init %empty {arrivals = 8 : i32} : !kiln.shared<2x1xi64>
    %p = kiln.program_id 0 : i32
    %n = kiln.num_programs 0 : i32
    kiln.producer warps(4) {
      scf.for %t = %p to %gx step %n : i32 {
        kiln.mbarrier_wait %empty[%c0], %c1 : !kiln.shared<2x1xi64>
        kiln.async_tma_copy %map[%t, %K], %ring[%c0], %full[%c0] : !kiln.shared<2x64x64xf16>, !kiln.shared<2x1xi64>
        kiln.mbarrier_arrive %full[%c0] : !kiln.shared<2x1xi64>
      }
    }
    scf.for %t = %p to %gx step %n : i32 {
      kiln.mbarrier_wait %full[%c0], %c0 : !kiln.shared<2x1xi64>
      kiln.barrier
      kiln.mbarrier_arrive %empty[%c0] {per_warp} : !kiln.shared<2x1xi64>
      %rn = kiln.make_range 0 to 64 : tensor<64xi32, #cols>
      %ec = kiln.expand_dims %rn {axis = 0 : i32} : tensor<64xi32, #cols> -> tensor<1x64xi32, #cols>
      %off = kiln.broadcast %ec : tensor<1x64xi32, #cols> -> tensor<128x64xi32, #mma>
      %xs = kiln.splat %a : tensor<128x64x!kiln.ptr<f16>, #mma>
      %xp = kiln.addptr %xs, %off : tensor<128x64x!kiln.ptr<f16>, #mma>, tensor<128x64xi32, #mma>
      %v = kiln.load %xp : tensor<128x64x!kiln.ptr<f16>, #mma>
      kiln.tma_store %v, %map[%t, %c0] : tensor<128x64xf16, #mma>
    }
    return
  }
}
