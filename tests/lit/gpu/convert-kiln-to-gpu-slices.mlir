// RUN: kiln-opt %s -split-input-file -convert-kiln-to-gpu="num-warps=4" | FileCheck %s

// A bias row in the column slice of a 64x16 accumulator (4 warps on rows,
// two 8-column tiles per warp): each thread loads its 4 columns, 2 * (lane
// % 4) and 2 * (lane % 4) + 1 of each tile, and the broadcast along the
// rows reads them where the accumulator elements lie: no shared memory, no
// barrier.
// CHECK-LABEL: gpu.func @test_bias_columns
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c32_i32 : i32
// CHECK: %[[Q:.*]] = arith.remui %[[LANE]], %c4_i32 : i32
// CHECK: arith.muli %[[Q]], %c2_i32 : i32
// CHECK-COUNT-4: ld.global.b32
// CHECK-NOT: ld.global
// CHECK-NOT: gpu.barrier
// CHECK-NOT: llvm.store
// CHECK-COUNT-8: arith.mulf
// CHECK: gpu.barrier
// CHECK: gpu.return
#cols = #kiln.slice<dim = 0, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
#b = #kiln.blocked<vec = 1, warps = 4>
func.func @test_bias_columns(%bias: !kiln.ptr<f32>, %c: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %rn = kiln.make_range 0 to 16 : tensor<16xi32, #cols>
  %ns = kiln.splat %n : tensor<16xi32, #cols>
  %in = arith.cmpi slt, %rn, %ns : tensor<16xi32, #cols>
  %base = kiln.splat %bias : tensor<16x!kiln.ptr<f32>, #cols>
  %p = kiln.addptr %base, %rn : tensor<16x!kiln.ptr<f32>, #cols>, tensor<16xi32, #cols>
  %l = kiln.load %p, %in : tensor<16x!kiln.ptr<f32>, #cols>
  %e = kiln.expand_dims %l {axis = 0 : i32} : tensor<16xf32, #cols> -> tensor<1x16xf32, #cols>
  %bb = kiln.broadcast %e : tensor<1x16xf32, #cols> -> tensor<64x16xf32, #mma>
  %sq = arith.mulf %bb, %bb : tensor<64x16xf32, #mma>
  %out = kiln.convert_layout %sq : tensor<64x16xf32, #mma> -> tensor<64x16xf32, #b>
  %r = kiln.make_range 0 to 1024 : tensor<1024xi32, #b>
  %r2 = kiln.reshape %r : tensor<1024xi32, #b> -> tensor<64x16xi32, #b>
  %cs = kiln.splat %c : tensor<64x16x!kiln.ptr<f32>, #b>
  %cp = kiln.addptr %cs, %r2 : tensor<64x16x!kiln.ptr<f32>, #b>, tensor<64x16xi32, #b>
  kiln.store %cp, %out : tensor<64x16x!kiln.ptr<f32>, #b>
  return
}
