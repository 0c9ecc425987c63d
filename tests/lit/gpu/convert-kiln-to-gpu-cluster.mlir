// A row reduced over a thread-block cluster: the kernel asks for clusters of
// 4 (kiln.cluster_dim, and kiln_cluster_size for the launcher), each program
// publishes its value in its shared memory, and after a cluster barrier every
// thread reads the four values through distributed shared memory, in rank
// order; a second cluster barrier keeps them alive until all have read.
//
// A gather exchanges several values in one round: each program stores its
// scalar and row in its shared memory, one cluster barrier, each thread
// reads the elements it holds of the (4) and (4, 64) results from their
// ranks, and the second cluster barrier.
// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=4" -convert-kiln-to-gpu="num-warps=4 arch=sm_90a" | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-coalesce="num-warps=4" -convert-kiln-to-gpu="num-warps=4 arch=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80

// CHECK: llvm.mlir.global external constant @kiln_cluster_size(4 : i32)
// CHECK-LABEL: gpu.func @test_cluster_sum
// CHECK-SAME: kiln.cluster_dim = 4 : i32
// CHECK: gpu.barrier
// CHECK: llvm.store
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK: barrier.cluster.wait.acquire.aligned;
// CHECK-COUNT-4: mapa.shared::cluster.u32
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK: barrier.cluster.wait.acquire.aligned;
// SM80: kiln.cluster_reduce needs thread-block clusters (sm_90 or newer)
// SM80: kiln.cluster_gather needs thread-block clusters (sm_90 or newer)
func.func @test_cluster_sum(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %pid = kiln.program_id 0 : i32
  %c512 = arith.constant 512 : i32
  %start = arith.muli %pid, %c512 : i32
  %r = kiln.make_range 0 to 512 : tensor<512xi32>
  %s = kiln.splat %start : tensor<512xi32>
  %offs = arith.addi %s, %r : tensor<512xi32>
  %xs = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %xp = kiln.addptr %xs, %offs : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %v = kiln.load %xp : tensor<512x!kiln.ptr<f32>>
  %part = kiln.reduce sum %v axis 0 : tensor<512xf32> -> f32
  %total = kiln.cluster_reduce sum %part size 4
  %yp = kiln.addptr %y, %pid : !kiln.ptr<f32>, i32
  kiln.store %yp, %total : !kiln.ptr<f32>
  return
}

// -----

// CHECK: llvm.mlir.global external constant @kiln_cluster_size(4 : i32)
// CHECK-LABEL: gpu.func @test_cluster_gather
// CHECK-SAME: kiln.cluster_dim = 4 : i32
// CHECK: gpu.barrier
// CHECK: llvm.store
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK-NEXT: barrier.cluster.wait.acquire.aligned;
// CHECK-NOT: barrier.cluster
// CHECK: mapa.shared::cluster.u32
// CHECK: ld.shared::cluster.f32
// CHECK-NOT: barrier.cluster
// CHECK: mapa.shared::cluster.u32
// CHECK: ld.shared::cluster.f32
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK-NEXT: barrier.cluster.wait.acquire.aligned;
// CHECK-NOT: barrier.cluster
// CHECK: gpu.return
func.func @test_cluster_gather(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %pid = kiln.program_id 0 : i32
  %r = kiln.make_range 0 to 64 : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %xp = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %xp : tensor<64x!kiln.ptr<f32>>
  %m = kiln.reduce max %v axis 0 : tensor<64xf32> -> f32
  %ms, %vs = kiln.cluster_gather %m, %v size 4 : f32, tensor<64xf32> -> tensor<4xf32>, tensor<4x64xf32>
  %top = kiln.reduce max %ms axis 0 : tensor<4xf32> -> f32
  %col = kiln.reduce sum %vs axis 0 : tensor<4x64xf32> -> tensor<64xf32>
  %tops = kiln.splat %top : tensor<64xf32>
  %o = arith.addf %col, %tops : tensor<64xf32>
  %ys = kiln.splat %y : tensor<64x!kiln.ptr<f32>>
  %yp = kiln.addptr %ys, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  kiln.store %yp, %o : tensor<64x!kiln.ptr<f32>>
  return
}
