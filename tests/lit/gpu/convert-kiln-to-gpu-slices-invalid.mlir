// RUN: kiln-opt %s -split-input-file -convert-kiln-to-gpu="num-warps=4" -verify-diagnostics

// A column slice is stored through a conversion to a blocked layout (the
// layout passes insert it); a store of the slice itself is refused.
#cols = #kiln.slice<dim = 0, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>
func.func @test_not_store_column_slice(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %rn = kiln.make_range 0 to 16 : tensor<16xi32, #cols>
  %base = kiln.splat %x : tensor<16x!kiln.ptr<f32>, #cols>
  %p = kiln.addptr %base, %rn : tensor<16x!kiln.ptr<f32>, #cols>, tensor<16xi32, #cols>
  %v = kiln.load %p : tensor<16x!kiln.ptr<f32>, #cols>
  // expected-error @+1 {{a slice of an accumulator layout is stored through a conversion to a blocked layout}}
  kiln.store %p, %v : tensor<16x!kiln.ptr<f32>, #cols>
  return
}

// -----

// A column slice broadcasts into its accumulator layout only.
#cols = #kiln.slice<dim = 0, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>
#b = #kiln.blocked<vec = 1, warps = 4>
func.func @test_not_broadcast_column_slice_blocked(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %rn = kiln.make_range 0 to 16 : tensor<16xi32, #cols>
  %base = kiln.splat %x : tensor<16x!kiln.ptr<f32>, #cols>
  %p = kiln.addptr %base, %rn : tensor<16x!kiln.ptr<f32>, #cols>, tensor<16xi32, #cols>
  %v = kiln.load %p : tensor<16x!kiln.ptr<f32>, #cols>
  %e = kiln.expand_dims %v {axis = 0 : i32} : tensor<16xf32, #cols> -> tensor<1x16xf32, #cols>
  // expected-error @+1 {{a slice of an accumulator layout broadcasts into that layout only}}
  %w = kiln.broadcast %e : tensor<1x16xf32, #cols> -> tensor<64x16xf32, #b>
  %r = kiln.make_range 0 to 1024 : tensor<1024xi32, #b>
  %r2 = kiln.reshape %r : tensor<1024xi32, #b> -> tensor<64x16xi32, #b>
  %ys = kiln.splat %y : tensor<64x16x!kiln.ptr<f32>, #b>
  %q = kiln.addptr %ys, %r2 : tensor<64x16x!kiln.ptr<f32>, #b>, tensor<64x16xi32, #b>
  kiln.store %q, %w : tensor<64x16x!kiln.ptr<f32>, #b>
  return
}
