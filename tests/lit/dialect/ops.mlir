// Round trip of every kiln op through the printer and parser.
// RUN: kiln-opt %s | kiln-opt | FileCheck %s

// CHECK-LABEL: func.func @test_grid_and_ranges
func.func @test_grid_and_ranges() -> (i32, i32, tensor<128xi32>) attributes {kiln.kernel} {
  // CHECK: kiln.program_id 0 : i32
  %0 = kiln.program_id 0 : i32
  // CHECK: kiln.num_programs 2 : i32
  %1 = kiln.num_programs 2 : i32
  // CHECK: kiln.make_range 0 to 128 : tensor<128xi32>
  %2 = kiln.make_range 0 to 128 : tensor<128xi32>
  return %0, %1, %2 : i32, i32, tensor<128xi32>
}

// CHECK-LABEL: func.func @test_shapes
func.func @test_shapes(%s: f32, %t: tensor<64xf32>) -> (tensor<64x128xf32>, tensor<8x8xf32>) {
  // CHECK: kiln.splat %{{.*}} : tensor<64x1xf32>
  %0 = kiln.splat %s : tensor<64x1xf32>
  // CHECK: kiln.expand_dims %{{.*}} {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  %1 = kiln.expand_dims %t {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  // CHECK: kiln.broadcast %{{.*}} : tensor<64x1xf32> -> tensor<64x128xf32>
  %2 = kiln.broadcast %1 : tensor<64x1xf32> -> tensor<64x128xf32>
  // CHECK: kiln.reshape %{{.*}} : tensor<64xf32> -> tensor<8x8xf32>
  %3 = kiln.reshape %t : tensor<64xf32> -> tensor<8x8xf32>
  return %2, %3 : tensor<64x128xf32>, tensor<8x8xf32>
}

// CHECK-LABEL: func.func @test_memory
func.func @test_memory(%p: !kiln.ptr<f16>, %offs: tensor<128xi32>, %m: tensor<128xi1>, %o: tensor<128xf16>) {
  %0 = kiln.splat %p : tensor<128x!kiln.ptr<f16>>
  // CHECK: kiln.addptr %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f16>>, tensor<128xi32>
  %1 = kiln.addptr %0, %offs : tensor<128x!kiln.ptr<f16>>, tensor<128xi32>
  // CHECK: kiln.load %{{.*}} : tensor<128x!kiln.ptr<f16>>
  %2 = kiln.load %1 : tensor<128x!kiln.ptr<f16>>
  // CHECK: kiln.load %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f16>>
  %3 = kiln.load %1, %m, %o : tensor<128x!kiln.ptr<f16>>
  // CHECK: kiln.store %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f16>>
  kiln.store %1, %3, %m : tensor<128x!kiln.ptr<f16>>
  // CHECK: kiln.load %{{.*}} : !kiln.ptr<f16>
  %4 = kiln.load %p : !kiln.ptr<f16>
  kiln.store %p, %4 : !kiln.ptr<f16>
  return
}

// CHECK-LABEL: func.func @test_compute
func.func @test_compute(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x16xf32>,
                        %m: tensor<64x16xi1>) -> (tensor<64xf32>, f32, tensor<16xi32>, tensor<64x16xf16>) {
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x16xf32>
  %0 = kiln.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x16xf32>
  // CHECK: kiln.reduce sum %{{.*}} axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %1 = kiln.reduce sum %0 axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  // CHECK: kiln.reduce max %{{.*}} axis 0 : tensor<64xf32> -> f32
  %2 = kiln.reduce max %1 axis 0 : tensor<64xf32> -> f32
  // CHECK: kiln.argmax %{{.*}} axis 0 : tensor<64x16xf32> -> tensor<16xi32>
  %3 = kiln.argmax %0 axis 0 : tensor<64x16xf32> -> tensor<16xi32>
  // CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x16xf32>
  %4 = kiln.select %m, %0, %c : tensor<64x16xf32>
  // CHECK: kiln.cast %{{.*}} : tensor<64x16xf32> to tensor<64x16xf16>
  %5 = kiln.cast %4 : tensor<64x16xf32> to tensor<64x16xf16>
  return %1, %2, %3, %5 : tensor<64xf32>, f32, tensor<16xi32>, tensor<64x16xf16>
}

// CHECK-LABEL: func.func @test_async_ring
func.func @test_async_ring(%p: tensor<64x32x!kiln.ptr<f16>>, %m: tensor<64x32xi1>, %s: i32) -> tensor<64x32xf16> {
  // CHECK: %[[RING:.*]] = kiln.local_alloc : <3x64x32xf16>
  %ring = kiln.local_alloc : !kiln.shared<3x64x32xf16>
  // CHECK: kiln.async_copy %{{.*}}, %[[RING]][%{{.*}}], %{{.*}} : tensor<64x32x!kiln.ptr<f16>>, <3x64x32xf16>
  kiln.async_copy %p, %ring[%s], %m : tensor<64x32x!kiln.ptr<f16>>, !kiln.shared<3x64x32xf16>
  // CHECK: kiln.async_commit
  kiln.async_commit
  // CHECK: kiln.async_wait {pending = 1 : i32}
  kiln.async_wait {pending = 1 : i32}
  // CHECK: kiln.local_load %[[RING]][%{{.*}}] : <3x64x32xf16> -> tensor<64x32xf16>
  %t = kiln.local_load %ring[%s] : !kiln.shared<3x64x32xf16> -> tensor<64x32xf16>
  return %t : tensor<64x32xf16>
}

// CHECK-LABEL: func.func @test_atomic_add
// CHECK: %{{.*}} = kiln.atomic_add %arg0, %arg1 : !kiln.ptr<i32>
func.func @test_atomic_add(%c: !kiln.ptr<i32>, %v: i32) -> i32 attributes {kiln.kernel} {
  %old = kiln.atomic_add %c, %v : !kiln.ptr<i32>
  return %old : i32
}

// CHECK-LABEL: func.func @test_atomic_accumulate
// CHECK: kiln.atomic_accumulate %arg0, %arg1, %arg2 : tensor<128x!kiln.ptr<f32>>
// CHECK: kiln.atomic_accumulate %arg0, %arg1 : tensor<128x!kiln.ptr<f32>>
func.func @test_atomic_accumulate(%p: tensor<128x!kiln.ptr<f32>>, %v: tensor<128xf32>, %m: tensor<128xi1>) attributes {kiln.kernel} {
  kiln.atomic_accumulate %p, %v, %m : tensor<128x!kiln.ptr<f32>>
  kiln.atomic_accumulate %p, %v : tensor<128x!kiln.ptr<f32>>
  return
}

// CHECK-LABEL: func.func @test_trans
func.func @test_trans(%t: tensor<64x32xf16>) -> tensor<32x64xf16> {
  // CHECK: kiln.trans %{{.*}} : tensor<64x32xf16> -> tensor<32x64xf16>
  %0 = kiln.trans %t : tensor<64x32xf16> -> tensor<32x64xf16>
  return %0 : tensor<32x64xf16>
}

// CHECK-LABEL: func.func @test_grid_dependency
func.func @test_grid_dependency() attributes {kiln.kernel} {
  // CHECK: kiln.launch_dependents
  kiln.launch_dependents
  // CHECK: kiln.grid_dependency_wait
  kiln.grid_dependency_wait
  return
}

// CHECK-LABEL: func.func @test_prefetch
func.func @test_prefetch(%p: tensor<64x!kiln.ptr<f16>>, %m: tensor<64xi1>, %q: !kiln.ptr<f32>) attributes {kiln.kernel} {
  // CHECK: kiln.prefetch %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f16>>
  kiln.prefetch %p, %m : tensor<64x!kiln.ptr<f16>>
  // CHECK: kiln.prefetch %{{.*}} : !kiln.ptr<f32>
  kiln.prefetch %q : !kiln.ptr<f32>
  return
}

// CHECK-LABEL: func.func @test_cluster_reduce
func.func @test_cluster_reduce(%x: f32) -> (f32, f32) attributes {kiln.kernel} {
  // CHECK: kiln.cluster_reduce max %{{.*}} size 4
  %0 = kiln.cluster_reduce max %x size 4
  // CHECK: kiln.cluster_reduce sum %{{.*}} size 4
  %1 = kiln.cluster_reduce sum %0 size 4
  return %0, %1 : f32, f32
}

// CHECK-LABEL: func.func @test_cluster_gather
func.func @test_cluster_gather(%m: f32, %acc: tensor<64xf32>) -> (tensor<4xf32>, tensor<4x64xf32>) attributes {kiln.kernel} {
  // CHECK: kiln.cluster_gather %{{.*}}, %{{.*}} size 4 : f32, tensor<64xf32> -> tensor<4xf32>, tensor<4x64xf32>
  %0:2 = kiln.cluster_gather %m, %acc size 4 : f32, tensor<64xf32> -> tensor<4xf32>, tensor<4x64xf32>
  return %0#0, %0#1 : tensor<4xf32>, tensor<4x64xf32>
}
