// RUN: not kiln-opt %s -convert-kiln-to-gpu="num-warps=0" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: kiln-opt %s -split-input-file -kiln-coalesce -kiln-accelerate-matmul -kiln-remove-layout-conversions -convert-kiln-to-gpu -verify-diagnostics

// WARPS: num-warps must be in [1, 32], got 0

// Tiles whose shared-memory staging exceeds what one CTA may use are rejected.
// expected-error @+1 {{kernel needs 394752 bytes of shared memory (limit 232448); use smaller blocks or fewer stages}}
func.func @test_not_too_much_smem(%a: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 384 : tensor<384xi32>
  %pa = kiln.splat %a : tensor<384x!kiln.ptr<f32>>
  %p = kiln.addptr %pa, %r : tensor<384x!kiln.ptr<f32>>, tensor<384xi32>
  %v = kiln.load %p : tensor<384x!kiln.ptr<f32>>
  %c = kiln.expand_dims %v {axis = 0 : i32} : tensor<384xf32> -> tensor<1x384xf32>
  %b = kiln.broadcast %c : tensor<1x384xf32> -> tensor<256x384xf32>
  %s = kiln.reduce sum %b axis 0 : tensor<256x384xf32> -> tensor<384xf32>
  kiln.store %p, %s : tensor<384x!kiln.ptr<f32>>
  return
}

// -----

// A 200x200 product does not divide among 128 threads: every thread would
// hold all 40000 elements (and the lowering once emitted 3.6M lines for it
// before running out of memory). It is refused before any code is emitted.
func.func @test_not_huge_replicated_dot(%a: !kiln.ptr<f16>, %out: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %x = kiln.load %a : !kiln.ptr<f16>
  %t = kiln.splat %x : tensor<200x200xf16>
  // expected-error @+1 {{of arith.constant would put 40000 elements in each of the 128 threads (at most 1024)}}
  %zero = arith.constant dense<0.0> : tensor<200x200xf32>
  %d = kiln.dot %t, %t, %zero : tensor<200x200xf16>, tensor<200x200xf16> -> tensor<200x200xf32>
  %s = kiln.reduce sum %d axis 0 : tensor<200x200xf32> -> tensor<200xf32>
  %m = kiln.reduce max %s axis 0 : tensor<200xf32> -> f32
  kiln.store %out, %m : !kiln.ptr<f32>
  return
}

// -----

// 8192-wide tiles divide among the threads but would hold 512 x 8192 / 128
// elements each.
func.func @test_not_wide_tile(%a: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %x = kiln.load %a : !kiln.ptr<f32>
  // expected-error @+1 {{would put 32768 elements in each of the 128 threads}}
  %t = kiln.splat %x : tensor<512x8192xf32>
  %s = kiln.reduce sum %t axis 0 : tensor<512x8192xf32> -> tensor<8192xf32>
  %m = kiln.reduce max %s axis 0 : tensor<8192xf32> -> f32
  kiln.store %a, %m : !kiln.ptr<f32>
  return
}
