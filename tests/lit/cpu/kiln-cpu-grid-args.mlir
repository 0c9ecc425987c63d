// RUN: kiln-opt %s -split-input-file -kiln-cpu-grid-args | FileCheck %s

// CHECK-LABEL: func.func @test_program_ids
// CHECK-SAME: (%[[X:.*]]: !kiln.ptr<f32>, %[[P0:.*]]: i32, %[[P1:.*]]: i32, %[[P2:.*]]: i32, %[[N0:.*]]: i32, %[[N1:.*]]: i32, %[[N2:.*]]: i32)
// CHECK-NOT: kiln.program_id
// CHECK-NOT: kiln.num_programs
// CHECK: arith.addi %[[P1]], %[[N2]]
// CHECK: arith.muli %[[P0]], %[[N0]]
func.func @test_program_ids(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %p1 = kiln.program_id 1 : i32
  %n2 = kiln.num_programs 2 : i32
  %a = arith.addi %p1, %n2 : i32
  %p0 = kiln.program_id 0 : i32
  %n0 = kiln.num_programs 0 : i32
  %b = arith.muli %p0, %n0 : i32
  %p = kiln.addptr %x, %a : !kiln.ptr<f32>, i32
  %v = arith.sitofp %b : i32 to f32
  kiln.store %p, %v : !kiln.ptr<f32>
  return
}

// -----

// Functions that are not kernels keep their signature: they are not launched.
// CHECK-LABEL: func.func @test_not_kernel(%{{.*}}: i32) -> i32
func.func @test_not_kernel(%x: i32) -> i32 {
  return %x : i32
}

// -----

// A kernel with cluster reductions tells the launcher its cluster size.
// CHECK-LABEL: func.func @test_cluster
// CHECK: kiln.cluster_reduce max
// CHECK-LABEL: func.func @kiln_cluster_size() -> i32
// CHECK: %[[C:.*]] = arith.constant 8 : i32
// CHECK: return %[[C]] : i32
func.func @test_cluster(%x: f32) -> f32 attributes {kiln.kernel} {
  %0 = kiln.cluster_reduce max %x size 8
  return %0 : f32
}

// -----

// So does a kernel whose only cluster op is a gather.
// CHECK-LABEL: func.func @test_cluster_gather
// CHECK-LABEL: func.func @kiln_cluster_size() -> i32
// CHECK: %[[C:.*]] = arith.constant 4 : i32
// CHECK: return %[[C]] : i32
func.func @test_cluster_gather(%x: f32) -> tensor<4xf32> attributes {kiln.kernel} {
  %0 = kiln.cluster_gather %x size 4 : f32 -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
