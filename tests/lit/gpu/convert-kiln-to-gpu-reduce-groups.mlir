// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=4" -kiln-remove-layout-conversions -convert-kiln-to-gpu="num-warps=4" | FileCheck %s

// Reductions in a row, none reading another's result, share one exchange
// through shared memory: each warp's partials of all three are stored (16
// bytes apart: 48 bytes of scratch), one barrier, every thread reads all
// three, one barrier. Alone each would take two barriers.
// CHECK: @kiln_smem_bytes(48 : i32)
// CHECK-LABEL: gpu.func @test_independent_reductions
// CHECK: gpu.shuffle xor
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK-NOT: gpu.barrier
// CHECK: arith.maximumf
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK-COUNT-12: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @test_independent_reductions(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 256 : tensor<256xi32>
  %xs = kiln.splat %x : tensor<256x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<256x!kiln.ptr<f32>>, tensor<256xi32>
  %v = kiln.load %p : tensor<256x!kiln.ptr<f32>>
  %q = arith.mulf %v, %v : tensor<256xf32>
  %s = kiln.reduce sum %v axis 0 : tensor<256xf32> -> f32
  %t = kiln.reduce sum %q axis 0 : tensor<256xf32> -> f32
  %m = kiln.reduce max %v axis 0 : tensor<256xf32> -> f32
  %u = arith.addf %s, %t : f32
  %w = arith.addf %u, %m : f32
  kiln.store %x, %w : !kiln.ptr<f32>
  return
}

// -----

// A reduction of what depends on the one before it (the variance about the
// mean) waits for it: two exchanges, two barriers each, in the same scratch.
// CHECK: @kiln_smem_bytes(16 : i32)
// CHECK-LABEL: gpu.func @test_dependent_reductions
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// CHECK: arith.subf
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
func.func @test_dependent_reductions(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 256 : tensor<256xi32>
  %xs = kiln.splat %x : tensor<256x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<256x!kiln.ptr<f32>>, tensor<256xi32>
  %v = kiln.load %p : tensor<256x!kiln.ptr<f32>>
  %s = kiln.reduce sum %v axis 0 : tensor<256xf32> -> f32
  %sv = kiln.splat %s : tensor<256xf32>
  %d = arith.subf %v, %sv : tensor<256xf32>
  %dd = arith.mulf %d, %d : tensor<256xf32>
  %t = kiln.reduce sum %dd axis 0 : tensor<256xf32> -> f32
  kiln.store %x, %t : !kiln.ptr<f32>
  return
}

// -----

// Rows of a 2-D tile (the last axis, through shared memory) and a 1-D
// reduction share one exchange: a partial a row (a row's 16 groups of 4
// lie in half a warp; 32 bytes), then the 4 warps' partials at byte 32.
// CHECK: @kiln_smem_bytes(48 : i32)
// CHECK-LABEL: gpu.func @test_rows_and_scalar
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @test_rows_and_scalar(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 512 : tensor<512xi32>
  %xs = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %v = kiln.load %p : tensor<512x!kiln.ptr<f32>>
  %m = kiln.reshape %v : tensor<512xf32> -> tensor<8x64xf32>
  %rows = kiln.reduce sum %m axis 1 : tensor<8x64xf32> -> tensor<8xf32>
  %all = kiln.reduce max %v axis 0 : tensor<512xf32> -> f32
  %o = kiln.make_range 0 to 8 : tensor<8xi32>
  %ys = kiln.splat %y : tensor<8x!kiln.ptr<f32>>
  %q = kiln.addptr %ys, %o : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  kiln.store %q, %rows : tensor<8x!kiln.ptr<f32>>
  kiln.store %y, %all : !kiln.ptr<f32>
  return
}
