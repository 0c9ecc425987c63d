// RUN: kiln-opt %s -split-input-file -kiln-pipeline-loads | FileCheck %s

// The load of iteration k + 16 is issued at the top of iteration k, guarded
// by k + 16 < K; the first iteration's load moves before the loop.
// CHECK-LABEL: func.func @test_prefetch
// CHECK: %[[FIRST_IN:.*]] = arith.cmpi slt, %c0_i32, %[[K:.*]] : i32
// CHECK: %[[FIRST_GUARD:.*]] = kiln.splat %[[FIRST_IN]] : tensor<16x16xi1>
// CHECK: %[[FIRST_MASK:.*]] = arith.andi %{{.*}}, %[[FIRST_GUARD]]
// CHECK: %[[FIRST:.*]] = kiln.load %{{.*}}, %[[FIRST_MASK]]
// CHECK: scf.for %[[IV:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[CUR:.*]] = %[[FIRST]])
// CHECK: %[[NEXT:.*]] = arith.addi %[[IV]], %c16_i32 : i32
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[NEXT]], %[[K]] : i32
// CHECK: %[[NEXT_TILE:.*]] = kiln.load
// CHECK: %[[D:.*]] = kiln.dot %[[CUR]], %{{.*}}, %[[ACC]]
// CHECK: scf.yield %[[D]], %[[NEXT_TILE]]
func.func @test_prefetch(%a: !kiln.ptr<f16>, %K: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %b = arith.constant dense<1.0> : tensor<16x16xf16>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %Ks = kiln.splat %K : tensor<16x16xi32>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %m = arith.cmpi slt, %off, %Ks : tensor<16x16xi32>
    %t = kiln.load %p, %m : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %t, %b, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %res : tensor<16x16xf32>
}

// -----

// A load whose address depends on a loop-carried value cannot be issued early.
// CHECK-LABEL: func.func @test_not_carried_address
// CHECK-NOT: kiln.load
// CHECK: scf.for
// CHECK: kiln.load
// CHECK: kiln.dot
// CHECK: scf.yield
func.func @test_not_carried_address(%a: !kiln.ptr<f16>, %n: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%p = %pa, %acc = %zero) -> (tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xf32>) : i32 {
    %v = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %v, %v, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    %ones = arith.constant dense<1> : tensor<16x16xi32>
    %q = kiln.addptr %p, %ones : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    scf.yield %q, %d : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xf32>
  }
  return %r#1 : tensor<16x16xf32>
}

// -----

// Streaming loops (no dot) are left alone.
// CHECK-LABEL: func.func @test_not_streaming
// CHECK-NOT: kiln.load
// CHECK: scf.for
// CHECK: kiln.load
func.func @test_not_streaming(%a: !kiln.ptr<f32>, %n: i32) -> f32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %z) -> (f32) : i32 {
    %p = kiln.addptr %a, %k : !kiln.ptr<f32>, i32
    %v = kiln.load %p : !kiln.ptr<f32>
    %t = arith.addf %s, %v : f32
    scf.yield %t : f32
  }
  return %r : f32
}
