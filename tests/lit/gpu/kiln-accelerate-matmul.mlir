// RUN: kiln-opt %s -split-input-file -kiln-accelerate-matmul | FileCheck %s

// A 64x64 product on 4 warps: 2x2 warps of 32x32 regions (the most
// square). The accumulator is converted to the tensor-core layout and the
// result back for its users; both operands are staged in shared memory,
// swizzled (16-bit rows of 4 and 8 chunks).
// CHECK-DAG: #[[B:blocked[0-9]*]] = #kiln.blocked<vec = 8, warps = 4>
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 2, warpsN = 2>
// CHECK-DAG: #[[S:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 4>
// CHECK-LABEL: func.func @test_square_warps
// CHECK: %[[A:.*]] = kiln.convert_layout %{{.*}} : tensor<64x32xf16, #[[B]]> -> tensor<64x32xf16, #[[S]]>
// CHECK: %[[BB:.*]] = kiln.convert_layout %{{.*}} : tensor<32x64xf16, #[[B]]> -> tensor<32x64xf16, #[[S]]>
// CHECK: %[[ACC:.*]] = kiln.convert_layout %{{.*}} : tensor<64x64xf32, #[[B]]> -> tensor<64x64xf32, #[[MMA]]>
// CHECK: %[[D:.*]] = kiln.dot %[[A]], %[[BB]], %[[ACC]] : tensor<64x32xf16, #[[S]]>, tensor<32x64xf16, #[[S]]> -> tensor<64x64xf32, #[[MMA]]>
// CHECK: %[[R:.*]] = kiln.convert_layout %[[D]] : tensor<64x64xf32, #[[MMA]]> -> tensor<64x64xf32, #[[B]]>
// CHECK: return %[[R]]
#b = #kiln.blocked<vec = 8, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_square_warps(%a: tensor<64x32xf16, #b>, %bm: tensor<32x64xf16, #b>, %acc: tensor<64x64xf32, #b>) -> tensor<64x64xf32, #b> attributes {kiln.kernel} {
    %d = kiln.dot %a, %bm, %acc : tensor<64x32xf16, #b>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #b>
    return %d : tensor<64x64xf32, #b>
  }
}

// -----

// Scores whose rows are reduced put every warp on rows (4x1), so that each
// warp holds whole rows. A ring buffer read only by tensor cores stays in
// shared memory, and its transpose (the B operand) is a view of it.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-DAG: #[[S:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 4>
// CHECK-DAG: #[[ST:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = true, warps = 4>
// CHECK-LABEL: func.func @test_rows_reduced
// CHECK: %[[K:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <2x64x64xf16> -> tensor<64x64xf16, #[[S]]>
// CHECK: %[[KT:.*]] = kiln.trans %[[K]] : tensor<64x64xf16, #[[S]]> -> tensor<64x64xf16, #[[ST]]>
// CHECK: kiln.dot %{{.*}}, %[[KT]], %{{.*}} : tensor<64x64xf16, #[[S]]>, tensor<64x64xf16, #[[ST]]> -> tensor<64x64xf32, #[[MMA]]>
#b = #kiln.blocked<vec = 8, warps = 4>
#r = #kiln.replicated<warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_rows_reduced(%q: tensor<64x64xf16, #b>, %acc: tensor<64x64xf32, #b>, %s: i32) -> tensor<64xf32, #r> attributes {kiln.kernel} {
    %ring = kiln.local_alloc : !kiln.shared<2x64x64xf16>
    %k = kiln.local_load %ring[%s] : !kiln.shared<2x64x64xf16> -> tensor<64x64xf16, #b>
    %kt = kiln.trans %k : tensor<64x64xf16, #b> -> tensor<64x64xf16, #b>
    %d = kiln.dot %q, %kt, %acc : tensor<64x64xf16, #b>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #b>
    %m = kiln.reduce max %d axis 1 : tensor<64x64xf32, #b> -> tensor<64xf32, #r>
    return %m : tensor<64xf32, #r>
  }
}

// -----

// Not on tensor cores: f32 operands (an FMA loop), and K = 8 (not a multiple
// of 16). The products keep their layouts.
// CHECK-LABEL: func.func @test_not_tensor_cores
// CHECK-NOT: kiln.convert_layout
// CHECK-NOT: #kiln.mma
#b = #kiln.blocked<vec = 8, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_not_tensor_cores(%a: tensor<64x32xf32, #b>, %bm: tensor<32x64xf32, #b>, %acc: tensor<64x64xf32, #b>,
                                   %a8: tensor<128x8xf16, #b>, %b8: tensor<8x128xf16, #b>, %acc8: tensor<128x128xf32, #b>) -> (tensor<64x64xf32, #b>, tensor<128x128xf32, #b>) attributes {kiln.kernel} {
    %d = kiln.dot %a, %bm, %acc : tensor<64x32xf32, #b>, tensor<32x64xf32, #b> -> tensor<64x64xf32, #b>
    %e = kiln.dot %a8, %b8, %acc8 : tensor<128x8xf16, #b>, tensor<8x128xf16, #b> -> tensor<128x128xf32, #b>
    return %d, %e : tensor<64x64xf32, #b>, tensor<128x128xf32, #b>
  }
}
