// RUN: kiln-opt %s -split-input-file -convert-kiln-to-cpu | FileCheck %s

// Pointers become i64 addresses; offsets are scaled by the element size.
// CHECK-LABEL: func.func @test_addptr
// CHECK-SAME: (%[[P:.*]]: i64, %[[O:.*]]: tensor<4xi32>) -> tensor<4xi64>
// CHECK-DAG: %[[SIZE:.*]] = arith.constant dense<2> : tensor<4xi64>
// CHECK-DAG: %[[SPLAT:.*]] = linalg.fill ins(%[[P]] : i64)
// CHECK-DAG: %[[EXT:.*]] = arith.extsi %[[O]] : tensor<4xi32> to tensor<4xi64>
// CHECK: %[[BYTES:.*]] = arith.muli %[[EXT]], %[[SIZE]]
// CHECK: arith.addi %[[SPLAT]], %[[BYTES]] : tensor<4xi64>
func.func @test_addptr(%p: !kiln.ptr<f16>, %o: tensor<4xi32>) -> tensor<4x!kiln.ptr<f16>> {
  %s = kiln.splat %p : tensor<4x!kiln.ptr<f16>>
  %r = kiln.addptr %s, %o : tensor<4x!kiln.ptr<f16>>, tensor<4xi32>
  return %r : tensor<4x!kiln.ptr<f16>>
}

// -----

// A masked load reads memory only under the mask, else yields the fill value.
// CHECK-LABEL: func.func @test_masked_load
// CHECK: linalg.generic
// CHECK: ^bb0(%[[ADDR:.*]]: i64, %[[M:.*]]: i1, %[[FILL:.*]]: f32, %{{.*}}: f32)
// CHECK: scf.if %[[M]] -> (f32)
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[ADDR]] : i64 to !llvm.ptr
// CHECK: llvm.load %[[PTR]] {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: } else {
// CHECK: scf.yield %[[FILL]] : f32
func.func @test_masked_load(%p: tensor<8x!kiln.ptr<f32>>, %m: tensor<8xi1>, %o: tensor<8xf32>) -> tensor<8xf32> {
  %v = kiln.load %p, %m, %o : tensor<8x!kiln.ptr<f32>>
  return %v : tensor<8xf32>
}

// -----

// A masked store is a loop nest over the tile with an scf.if per element.
// CHECK-LABEL: func.func @test_masked_store
// CHECK: scf.for %[[I:.*]] =
// CHECK: scf.for %[[J:.*]] =
// CHECK: %[[A:.*]] = tensor.extract %{{.*}}[%[[I]], %[[J]]] : tensor<2x4xi64>
// CHECK: %[[V:.*]] = tensor.extract %{{.*}}[%[[I]], %[[J]]] : tensor<2x4xf16>
// CHECK: %[[M:.*]] = tensor.extract %{{.*}}[%[[I]], %[[J]]] : tensor<2x4xi1>
// CHECK: scf.if %[[M]]
// CHECK: llvm.store %[[V]], %{{.*}} {alignment = 2 : i64} : f16, !llvm.ptr
func.func @test_masked_store(%p: tensor<2x4x!kiln.ptr<f16>>, %v: tensor<2x4xf16>, %m: tensor<2x4xi1>) {
  kiln.store %p, %v, %m : tensor<2x4x!kiln.ptr<f16>>
  return
}

// -----

// Broadcast dimensions read index 0 of the source.
// CHECK-DAG: #[[SRC:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[DST:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @test_broadcast
// CHECK: linalg.generic {indexing_maps = [#[[SRC]], #[[DST]]]
func.func @test_broadcast(%t: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %b = kiln.broadcast %t : tensor<4x1xf32> -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @test_shape_ops
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<8x1xf32> into tensor<8xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
func.func @test_shape_ops(%t: tensor<8xf32>) -> tensor<2x4xf32> {
  %e = kiln.expand_dims %t {axis = 1 : i32} : tensor<8xf32> -> tensor<8x1xf32>
  %r = kiln.reshape %e : tensor<8x1xf32> -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @test_range
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[C:.*]] = arith.index_cast %[[I]] : index to i32
// CHECK: arith.addi %[[C]], %{{.*}} : i32
func.func @test_range() -> tensor<16xi32> {
  %r = kiln.make_range 4 to 20 : tensor<16xi32>
  return %r : tensor<16xi32>
}

// -----

// dot is a linalg.matmul; linalg extends f16 operands into the f32 accumulator.
// CHECK-LABEL: func.func @test_dot
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x8xf16>, tensor<8x4xf16>) outs(%{{.*}} : tensor<16x4xf32>)
func.func @test_dot(%a: tensor<16x8xf16>, %b: tensor<8x4xf16>, %c: tensor<16x4xf32>) -> tensor<16x4xf32> {
  %d = kiln.dot %a, %b, %c : tensor<16x8xf16>, tensor<8x4xf16> -> tensor<16x4xf32>
  return %d : tensor<16x4xf32>
}

// -----

// Reductions start from their identity; a 1-D reduction yields a scalar.
// CHECK-LABEL: func.func @test_reduce
// CHECK: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEG_INF]] : f32)
// CHECK: linalg.reduce ins(%{{.*}} : tensor<8xf32>)
// CHECK: arith.maximumf
// CHECK: tensor.extract %{{.*}}[] : tensor<f32>
func.func @test_reduce(%t: tensor<8xf32>) -> f32 {
  %m = kiln.reduce max %t axis 0 : tensor<8xf32> -> f32
  return %m : f32
}

// -----

// CHECK-LABEL: func.func @test_argmax
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.cmpf ogt
// CHECK: arith.select
func.func @test_argmax(%t: tensor<4x8xf32>) -> tensor<4xi32> {
  %i = kiln.argmax %t axis 1 : tensor<4x8xf32> -> tensor<4xi32>
  return %i : tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @test_casts
// CHECK: arith.extf %{{.*}} : tensor<4xf16> to tensor<4xf32>
// CHECK: arith.fptosi %{{.*}} : tensor<4xf32> to tensor<4xi32>
// CHECK: arith.extf %{{.*}} : tensor<4xf16> to tensor<4xf32>
// CHECK: arith.truncf %{{.*}} : tensor<4xf32> to tensor<4xbf16>
func.func @test_casts(%t: tensor<4xf16>) -> (tensor<4xi32>, tensor<4xbf16>) {
  %f = kiln.cast %t : tensor<4xf16> to tensor<4xf32>
  %i = kiln.cast %f : tensor<4xf32> to tensor<4xi32>
  %b = kiln.cast %t : tensor<4xf16> to tensor<4xbf16>
  return %i, %b : tensor<4xi32>, tensor<4xbf16>
}


// -----

// CHECK-LABEL: func.func @test_trans
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x4xf32>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<4x8xf32>) outs(%[[E]] : tensor<8x4xf32>) permutation = [1, 0]
func.func @test_trans(%t: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = kiln.trans %t : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Kernels run one after another on the CPU: waiting on the previous one
// and letting the next one start are nothing.
// CHECK-LABEL: func.func @test_grid_dependency
// CHECK-NOT: kiln.
// CHECK: return
func.func @test_grid_dependency() {
  kiln.launch_dependents
  kiln.grid_dependency_wait
  return
}

// -----

// An L2 prefetch is a hint with nothing to act on here: it is dropped.
// CHECK-LABEL: func.func @test_prefetch
// CHECK-NOT: kiln.
// CHECK: return
func.func @test_prefetch(%w: !kiln.ptr<f16>) {
  kiln.prefetch %w : !kiln.ptr<f16>
  return
}

// -----

// Atomic additions are runtime calls (programs run on several threads), one
// an element, behind the element's mask bit.
// CHECK-LABEL: func.func @test_atomic_accumulate
// CHECK: scf.for
// CHECK: %[[A:.*]] = tensor.extract
// CHECK: %[[V:.*]] = tensor.extract
// CHECK: %[[M:.*]] = tensor.extract
// CHECK: scf.if %[[M]] {
// CHECK: func.call @kiln_atomic_add_f32(%[[A]], %[[V]]) : (i64, f32) -> ()
// CHECK-NOT: kiln.
func.func @test_atomic_accumulate(%p: tensor<4x!kiln.ptr<f32>>, %v: tensor<4xf32>, %m: tensor<4xi1>) {
  kiln.atomic_accumulate %p, %v, %m : tensor<4x!kiln.ptr<f32>>
  return
}

// -----

// On the CPU a cluster reduction is a call into the runtime, which meets the
// cluster's other programs (threads) at a barrier; the kind is its first
// argument (sum 0, max 1, min 2).
// CHECK: func.func private @kiln_cluster_reduce_f32(i32, f32) -> f32
// CHECK-LABEL: func.func @test_cluster_reduce
// CHECK: %[[K:.*]] = arith.constant 2 : i32
// CHECK: call @kiln_cluster_reduce_f32(%[[K]], %{{.*}}) : (i32, f32) -> f32
func.func @test_cluster_reduce(%x: f32) -> f32 attributes {kiln.kernel} {
  %0 = kiln.cluster_reduce min %x size 2
  return %0 : f32
}

// -----

// A cluster gather: each program puts its elements in its slots (the scalar
// at 0, the row at 1..4), meets the others, reads each rank's slots into
// its results, and meets them again before the slots are reused.
// CHECK-LABEL: func.func @test_cluster_gather
// CHECK: %[[N:.*]] = arith.constant 5 : i32
// CHECK: call @kiln_cluster_gather_begin(%[[N]]) : (i32) -> ()
// CHECK: call @kiln_cluster_put_f32(%{{.*}}, %{{.*}}) : (i32, f32) -> ()
// CHECK: scf.for
// CHECK: tensor.extract
// CHECK: call @kiln_cluster_put_f32
// CHECK: call @kiln_cluster_gather_sync() : () -> ()
// CHECK: linalg.generic
// CHECK: call @kiln_cluster_get_f32(%{{.*}}, %{{.*}}) : (i32, i32) -> f32
// CHECK: linalg.generic
// CHECK: linalg.index 1
// CHECK: call @kiln_cluster_get_f32
// CHECK: call @kiln_cluster_gather_sync() : () -> ()
func.func @test_cluster_gather(%m: f32, %row: tensor<4xf32>) -> (tensor<2xf32>, tensor<2x4xf32>) attributes {kiln.kernel} {
  %0:2 = kiln.cluster_gather %m, %row size 2 : f32, tensor<4xf32> -> tensor<2xf32>, tensor<2x4xf32>
  return %0#0, %0#1 : tensor<2xf32>, tensor<2x4xf32>
}
