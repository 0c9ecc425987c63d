// RUN: not kiln-opt %s -convert-kiln-to-gpu="num-warps=0" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: kiln-opt %s -split-input-file -convert-kiln-to-gpu -verify-diagnostics

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
