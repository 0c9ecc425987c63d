// RUN: kiln-opt %s -split-input-file -kiln-tma-stores="min-elements=0" -canonicalize | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-tma-stores -canonicalize | FileCheck %s --check-prefix=DEFAULT

// A GEMM epilogue: the f16 accumulator tile, converted to a blocked layout
// for coalesced stores, is stored into the (128 x 128) block at row
// pid * 128 of C (base 0, rows 1, columns 2, row stride 3), masked by C's
// extents. It becomes a TMA store of the accumulator-layout tile itself;
// the kernel gets C's tensor map (a box of 128 rows by one 64-column panel)
// and the conversion goes away.
// CHECK-LABEL: func.func @test_epilogue
// CHECK-SAME: %[[MAP:[^:]*]]: !kiln.tensormap {kiln.tensormap = {base = 0 : i32, box = array<i32: 128, 64>, cols = 2 : i32, rows = 1 : i32, stride = 3 : i32}}
// CHECK: %[[R0:.*]] = arith.muli %{{.*}}, %c128_i32 : i32
// CHECK: %[[H:.*]] = kiln.cast %{{.*}} : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma>
// CHECK-NEXT: kiln.tma_store %[[H]], %[[MAP]][%[[R0]], %c0_i32] : tensor<128x128xf16, #mma>
// CHECK-NOT: kiln.convert_layout
// CHECK-NOT: kiln.store
// DEFAULT-LABEL: func.func @test_epilogue
// DEFAULT: kiln.tma_store
#r = #kiln.replicated<warps = 8>
#b = #kiln.blocked<vec = 8, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_epilogue(%c: !kiln.ptr<f16>, %M: i32, %N: i32, %ldc: i32, %acc: tensor<128x128xf32, #mma>) attributes {kiln.kernel} {
    %c128 = arith.constant 128 : i32
    %pid = kiln.program_id 0 : i32
    %r0 = arith.muli %pid, %c128 : i32
    %range = kiln.make_range 0 to 128 : tensor<128xi32, #r>
    %r0s = kiln.splat %r0 : tensor<128xi32, #r>
    %rm = arith.addi %r0s, %range : tensor<128xi32, #r>
    %rows = kiln.expand_dims %rm {axis = 1 : i32} : tensor<128xi32, #r> -> tensor<128x1xi32, #r>
    %cols = kiln.expand_dims %range {axis = 0 : i32} : tensor<128xi32, #r> -> tensor<1x128xi32, #r>
    %ldcs = kiln.splat %ldc : tensor<128x1xi32, #r>
    %rowoff = arith.muli %rows, %ldcs : tensor<128x1xi32, #r>
    %rowoffb = kiln.broadcast %rowoff : tensor<128x1xi32, #r> -> tensor<128x128xi32, #b>
    %colsb = kiln.broadcast %cols : tensor<1x128xi32, #r> -> tensor<128x128xi32, #b>
    %off = arith.addi %rowoffb, %colsb : tensor<128x128xi32, #b>
    %pc = kiln.splat %c : tensor<128x128x!kiln.ptr<f16>, #b>
    %p = kiln.addptr %pc, %off : tensor<128x128x!kiln.ptr<f16>, #b>, tensor<128x128xi32, #b>
    %Ms = kiln.splat %M : tensor<128x1xi32, #r>
    %rowmask = arith.cmpi slt, %rows, %Ms : tensor<128x1xi32, #r>
    %Ns = kiln.splat %N : tensor<1x128xi32, #r>
    %colmask = arith.cmpi slt, %cols, %Ns : tensor<1x128xi32, #r>
    %rowmaskb = kiln.broadcast %rowmask : tensor<128x1xi1, #r> -> tensor<128x128xi1, #b>
    %colmaskb = kiln.broadcast %colmask : tensor<1x128xi1, #r> -> tensor<128x128xi1, #b>
    %mask = arith.andi %rowmaskb, %colmaskb : tensor<128x128xi1, #b>
    %h = kiln.cast %acc : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma>
    %v = kiln.convert_layout %h : tensor<128x128xf16, #mma> -> tensor<128x128xf16, #b>
    kiln.store %p, %v, %mask : tensor<128x128x!kiln.ptr<f16>, #b>
    return
  }
}

// -----

// A 64x64 tile qualifies, but by default only tiles of 8192 elements or
// more are stored by TMA (in small tiles' short programs it does not pay).
// CHECK-LABEL: func.func @test_small_tile
// CHECK: kiln.tma_store %{{.*}} : tensor<64x64xf16, #mma>
// DEFAULT-LABEL: func.func @test_small_tile
// DEFAULT-NOT: kiln.tma_store
// DEFAULT: kiln.store
#r = #kiln.replicated<warps = 4>
#b = #kiln.blocked<vec = 8, warps = 4>
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_small_tile(%c: !kiln.ptr<f16>, %M: i32, %N: i32, %ldc: i32, %acc: tensor<64x64xf16, #mma>) attributes {kiln.kernel} {
    %range = kiln.make_range 0 to 64 : tensor<64xi32, #r>
    %rows = kiln.expand_dims %range {axis = 1 : i32} : tensor<64xi32, #r> -> tensor<64x1xi32, #r>
    %cols = kiln.expand_dims %range {axis = 0 : i32} : tensor<64xi32, #r> -> tensor<1x64xi32, #r>
    %ldcs = kiln.splat %ldc : tensor<64x1xi32, #r>
    %rowoff = arith.muli %rows, %ldcs : tensor<64x1xi32, #r>
    %rowoffb = kiln.broadcast %rowoff : tensor<64x1xi32, #r> -> tensor<64x64xi32, #b>
    %colsb = kiln.broadcast %cols : tensor<1x64xi32, #r> -> tensor<64x64xi32, #b>
    %off = arith.addi %rowoffb, %colsb : tensor<64x64xi32, #b>
    %pc = kiln.splat %c : tensor<64x64x!kiln.ptr<f16>, #b>
    %p = kiln.addptr %pc, %off : tensor<64x64x!kiln.ptr<f16>, #b>, tensor<64x64xi32, #b>
    %Ms = kiln.splat %M : tensor<64x1xi32, #r>
    %rowmask = arith.cmpi slt, %rows, %Ms : tensor<64x1xi32, #r>
    %Ns = kiln.splat %N : tensor<1x64xi32, #r>
    %colmask = arith.cmpi slt, %cols, %Ns : tensor<1x64xi32, #r>
    %rowmaskb = kiln.broadcast %rowmask : tensor<64x1xi1, #r> -> tensor<64x64xi1, #b>
    %colmaskb = kiln.broadcast %colmask : tensor<1x64xi1, #r> -> tensor<64x64xi1, #b>
    %mask = arith.andi %rowmaskb, %colmaskb : tensor<64x64xi1, #b>
    %v = kiln.convert_layout %acc : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #b>
    kiln.store %p, %v, %mask : tensor<64x64x!kiln.ptr<f16>, #b>
    return
  }
}

// -----

// A load after the store may read what it wrote: the store stays as it is.
// CHECK-LABEL: func.func @test_read_after
// CHECK-NOT: kiln.tensormap
// CHECK: kiln.convert_layout
// CHECK: kiln.store
// CHECK-NOT: kiln.tma_store
#r = #kiln.replicated<warps = 4>
#b = #kiln.blocked<vec = 8, warps = 4>
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_read_after(%c: !kiln.ptr<f16>, %M: i32, %N: i32, %ldc: i32, %acc: tensor<64x64xf16, #mma>, %flag: !kiln.ptr<i32>) -> i32 attributes {kiln.kernel} {
    %range = kiln.make_range 0 to 64 : tensor<64xi32, #r>
    %rows = kiln.expand_dims %range {axis = 1 : i32} : tensor<64xi32, #r> -> tensor<64x1xi32, #r>
    %cols = kiln.expand_dims %range {axis = 0 : i32} : tensor<64xi32, #r> -> tensor<1x64xi32, #r>
    %ldcs = kiln.splat %ldc : tensor<64x1xi32, #r>
    %rowoff = arith.muli %rows, %ldcs : tensor<64x1xi32, #r>
    %rowoffb = kiln.broadcast %rowoff : tensor<64x1xi32, #r> -> tensor<64x64xi32, #b>
    %colsb = kiln.broadcast %cols : tensor<1x64xi32, #r> -> tensor<64x64xi32, #b>
    %off = arith.addi %rowoffb, %colsb : tensor<64x64xi32, #b>
    %pc = kiln.splat %c : tensor<64x64x!kiln.ptr<f16>, #b>
    %p = kiln.addptr %pc, %off : tensor<64x64x!kiln.ptr<f16>, #b>, tensor<64x64xi32, #b>
    %Ms = kiln.splat %M : tensor<64x1xi32, #r>
    %rowmask = arith.cmpi slt, %rows, %Ms : tensor<64x1xi32, #r>
    %Ns = kiln.splat %N : tensor<1x64xi32, #r>
    %colmask = arith.cmpi slt, %cols, %Ns : tensor<1x64xi32, #r>
    %rowmaskb = kiln.broadcast %rowmask : tensor<64x1xi1, #r> -> tensor<64x64xi1, #b>
    %colmaskb = kiln.broadcast %colmask : tensor<1x64xi1, #r> -> tensor<64x64xi1, #b>
    %mask = arith.andi %rowmaskb, %colmaskb : tensor<64x64xi1, #b>
    %v = kiln.convert_layout %acc : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #b>
    kiln.store %p, %v, %mask : tensor<64x64x!kiln.ptr<f16>, #b>
    %x = kiln.load %flag : !kiln.ptr<i32>
    return %x : i32
  }
}

// -----

// A tile that was never in an accumulator layout is already stored
// coalesced, and a mask that is not the tensor's extents (rows bounded by a
// value the kernel loads) is not TMA's to apply: both stay plain stores.
// CHECK-LABEL: func.func @test_not_epilogue
// CHECK-NOT: kiln.tensormap
// CHECK-NOT: kiln.tma_store
#r = #kiln.replicated<warps = 4>
#b = #kiln.blocked<vec = 8, warps = 4>
#mma = #kiln.mma<version = 3, warpsM = 4, warpsN = 1>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_not_epilogue(%c: !kiln.ptr<f16>, %len: !kiln.ptr<i32>, %N: i32, %ldc: i32, %acc: tensor<64x64xf16, #mma>, %t: tensor<64x64xf16, #b>) attributes {kiln.kernel} {
    %M = kiln.load %len : !kiln.ptr<i32>
    %range = kiln.make_range 0 to 64 : tensor<64xi32, #r>
    %rows = kiln.expand_dims %range {axis = 1 : i32} : tensor<64xi32, #r> -> tensor<64x1xi32, #r>
    %cols = kiln.expand_dims %range {axis = 0 : i32} : tensor<64xi32, #r> -> tensor<1x64xi32, #r>
    %ldcs = kiln.splat %ldc : tensor<64x1xi32, #r>
    %rowoff = arith.muli %rows, %ldcs : tensor<64x1xi32, #r>
    %rowoffb = kiln.broadcast %rowoff : tensor<64x1xi32, #r> -> tensor<64x64xi32, #b>
    %colsb = kiln.broadcast %cols : tensor<1x64xi32, #r> -> tensor<64x64xi32, #b>
    %off = arith.addi %rowoffb, %colsb : tensor<64x64xi32, #b>
    %pc = kiln.splat %c : tensor<64x64x!kiln.ptr<f16>, #b>
    %p = kiln.addptr %pc, %off : tensor<64x64x!kiln.ptr<f16>, #b>, tensor<64x64xi32, #b>
    %Ms = kiln.splat %M : tensor<64x1xi32, #r>
    %rowmask = arith.cmpi slt, %rows, %Ms : tensor<64x1xi32, #r>
    %Ns = kiln.splat %N : tensor<1x64xi32, #r>
    %colmask = arith.cmpi slt, %cols, %Ns : tensor<1x64xi32, #r>
    %rowmaskb = kiln.broadcast %rowmask : tensor<64x1xi1, #r> -> tensor<64x64xi1, #b>
    %colmaskb = kiln.broadcast %colmask : tensor<1x64xi1, #r> -> tensor<64x64xi1, #b>
    %mask = arith.andi %rowmaskb, %colmaskb : tensor<64x64xi1, #b>
    kiln.store %p, %t, %mask : tensor<64x64x!kiln.ptr<f16>, #b>
    %v = kiln.convert_layout %acc : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #b>
    kiln.store %p, %v, %mask : tensor<64x64x!kiln.ptr<f16>, #b>
    return
  }
}
