// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=4" | FileCheck %s
// RUN: not kiln-opt %s -kiln-coalesce="num-warps=3" 2>&1 | FileCheck %s --check-prefix=WARPS

// WARPS: kiln-coalesce: num-warps must be a power of two in [1, 32], got 3

// A 1024-element tile over 128 threads: groups of 8 consecutive elements
// (16 bytes of f16), group q in thread q mod 128. Tiles of one shape share
// the layout whatever their element type (pointers, offsets, masks, values),
// and the module records the warps.
// CHECK: #[[B8:blocked[0-9]*]] = #kiln.blocked<vec = 8, warps = 4>
// CHECK: module attributes {kiln.num_warps = 4 : i32}
// CHECK-LABEL: func.func @test_vector_add
// CHECK: kiln.make_range 0 to 1024 : tensor<1024xi32, #[[B8]]>
// CHECK: kiln.splat %{{.*}} : tensor<1024x!kiln.ptr<f16>, #[[B8]]>
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : tensor<1024xi32, #[[B8]]>
// CHECK: kiln.load %{{.*}}, %{{.*}} : tensor<1024x!kiln.ptr<f16>, #[[B8]]>
// CHECK: arith.addf %{{.*}}, %{{.*}} : tensor<1024xf16, #[[B8]]>
func.func @test_vector_add(%x: !kiln.ptr<f16>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 1024 : tensor<1024xi32>
  %p0 = kiln.splat %x : tensor<1024x!kiln.ptr<f16>>
  %p = kiln.addptr %p0, %r : tensor<1024x!kiln.ptr<f16>>, tensor<1024xi32>
  %ns = kiln.splat %n : tensor<1024xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<1024xi32>
  %v = kiln.load %p, %m : tensor<1024x!kiln.ptr<f16>>
  %w = arith.addf %v, %v : tensor<1024xf16>
  kiln.store %p, %w, %m : tensor<1024x!kiln.ptr<f16>>
  return
}

// -----

// Groups stay within a row: a (64, 4) tile has 2 elements per thread, one
// group of 2; a (128, 3) tile groups nothing. A 16-element tile is too small
// to divide among 128 threads: every thread holds all of it. Constants and
// loop-carried tiles get layouts too.
// CHECK-DAG: #[[B2:blocked[0-9]*]] = #kiln.blocked<vec = 2, warps = 4>
// CHECK-DAG: #[[B1:blocked[0-9]*]] = #kiln.blocked<vec = 1, warps = 4>
// CHECK-DAG: #[[R:replicated[0-9]*]] = #kiln.replicated<warps = 4>
// CHECK-LABEL: func.func @test_shapes
// CHECK: arith.constant dense<1.000000e+00> : tensor<64x4xf32, #[[B2]]>
// CHECK: kiln.splat %{{.*}} : tensor<128x3xf32, #[[B1]]>
// CHECK: kiln.splat %{{.*}} : tensor<16xf32, #[[R]]>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<64x4xf32, #[[B2]]>)
// CHECK: arith.addf %{{.*}}, %{{.*}} : tensor<64x4xf32, #[[B2]]>
func.func @test_shapes(%s: f32, %n: i32) attributes {kiln.kernel} {
  %one = arith.constant dense<1.0> : tensor<64x4xf32>
  %a = kiln.splat %s : tensor<128x3xf32>
  %b = kiln.splat %s : tensor<16xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %one) -> (tensor<64x4xf32>) : i32 {
    %next = arith.addf %acc, %one : tensor<64x4xf32>
    scf.yield %next : tensor<64x4xf32>
  }
  return
}

// -----

// The group is 16 bytes of the narrowest element accessed contiguously at a
// shape: f32 loads and stores with consecutive addresses give groups of 4
// (each a 16-byte access, a warp's access one 512-byte run), while the
// strided load of the (64, 16) tile (addresses 2 apart along its rows)
// leaves its shape at groups of up to 8.
// CHECK-DAG: #[[B4:blocked[0-9]*]] = #kiln.blocked<vec = 4, warps = 4>
// CHECK-DAG: #[[B8:blocked[0-9]*]] = #kiln.blocked<vec = 8, warps = 4>
// CHECK-LABEL: func.func @test_contiguity
// CHECK: kiln.load %{{.*}} : tensor<1024x!kiln.ptr<f32>, #[[B4]]>
// CHECK: math.exp %{{.*}} : tensor<1024xf32, #[[B4]]>
// CHECK: kiln.load %{{.*}} : tensor<64x16x!kiln.ptr<f32>, #[[B8]]>
func.func @test_contiguity(%x: !kiln.ptr<f32>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 1024 : tensor<1024xi32>
  %p0 = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %p = kiln.addptr %p0, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %p : tensor<1024x!kiln.ptr<f32>>
  %e = math.exp %v : tensor<1024xf32>
  kiln.store %p, %e : tensor<1024x!kiln.ptr<f32>>
  %c = kiln.make_range 0 to 16 : tensor<16xi32>
  %two = arith.constant dense<2> : tensor<1x16xi32>
  %ce = kiln.expand_dims %c {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
  %cs = arith.muli %ce, %two : tensor<1x16xi32>
  %cb = kiln.broadcast %cs : tensor<1x16xi32> -> tensor<64x16xi32>
  %q0 = kiln.splat %x : tensor<64x16x!kiln.ptr<f32>>
  %q = kiln.addptr %q0, %cb : tensor<64x16x!kiln.ptr<f32>>, tensor<64x16xi32>
  %w = kiln.load %q : tensor<64x16x!kiln.ptr<f32>>
  kiln.store %q, %w : tensor<64x16x!kiln.ptr<f32>>
  return
}
