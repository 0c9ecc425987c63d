// The whole CPU pipeline: a traced vector-add kernel down to the LLVM dialect.
// RUN: kiln-opt %s -kiln-cpu-pipeline | FileCheck %s

// CHECK-LABEL: llvm.func @test_vector_add
// CHECK-SAME: (%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-NOT: = kiln.
// CHECK-NOT: kiln.store
// CHECK-NOT: tensor.
// CHECK-NOT: linalg.
// CHECK: llvm.load
// CHECK: llvm.fadd
// CHECK: llvm.store
func.func @test_vector_add(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>, %out: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %pid = kiln.program_id 0 : i32
  %c128 = arith.constant 128 : i32
  %start = arith.muli %pid, %c128 : i32
  %r = kiln.make_range 0 to 128 : tensor<128xi32>
  %s = kiln.splat %start : tensor<128xi32>
  %offs = arith.addi %s, %r : tensor<128xi32>
  %ns = kiln.splat %n : tensor<128xi32>
  %mask = arith.cmpi slt, %offs, %ns : tensor<128xi32>
  %xs = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %xp = kiln.addptr %xs, %offs : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %ys = kiln.splat %y : tensor<128x!kiln.ptr<f32>>
  %yp = kiln.addptr %ys, %offs : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %os = kiln.splat %out : tensor<128x!kiln.ptr<f32>>
  %op = kiln.addptr %os, %offs : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %a = kiln.load %xp, %mask : tensor<128x!kiln.ptr<f32>>
  %b = kiln.load %yp, %mask : tensor<128x!kiln.ptr<f32>>
  %sum = arith.addf %a, %b : tensor<128xf32>
  kiln.store %op, %sum, %mask : tensor<128x!kiln.ptr<f32>>
  return
}
