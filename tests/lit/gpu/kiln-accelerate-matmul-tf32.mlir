// RUN: kiln-opt %s -split-input-file -kiln-accelerate-matmul="arch=sm_90a" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-accelerate-matmul="arch=sm_80" | FileCheck %s --check-prefix=SM80

// An f32 product that allows TF32, on sm_90a: wgmma, which reads both
// operands K-major. A is read in place from its ring (rows of 32 f32 = one
// 128-byte swizzle panel); B, a (K x N) ring tile, is read into registers
// and staged as its transpose (N x K). sm_80 has no TF32 path: the FMA loop.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
// CHECK-DAG: #[[S:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 8>
// CHECK-DAG: #[[ST:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = true, warps = 8>
// CHECK-LABEL: func.func @test_tf32
// CHECK: %[[A:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x128x32xf32> -> tensor<128x32xf32, #[[S]]>
// CHECK: %[[B:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x32x128xf32> -> tensor<32x128xf32, #blocked>
// CHECK: %[[BT:.*]] = kiln.convert_layout %[[B]] : tensor<32x128xf32, #blocked> -> tensor<32x128xf32, #[[ST]]>
// CHECK: kiln.dot %[[A]], %[[BT]], %{{.*}} {tf32} : tensor<128x32xf32, #[[S]]>, tensor<32x128xf32, #[[ST]]> -> tensor<128x128xf32, #[[MMA]]>
// SM80-LABEL: func.func @test_tf32
// SM80-NOT: #kiln.mma
// SM80: kiln.dot %{{.*}} {tf32} : tensor<128x32xf32, #blocked>, tensor<32x128xf32, #blocked> -> tensor<128x128xf32, #blocked>
#b = #kiln.blocked<vec = 4, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_tf32(%acc: tensor<128x128xf32, #b>, %s: i32) -> tensor<128x128xf32, #b> attributes {kiln.kernel} {
    %ra = kiln.local_alloc : !kiln.shared<3x128x32xf32>
    %rb = kiln.local_alloc : !kiln.shared<3x32x128xf32>
    %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x32xf32> -> tensor<128x32xf32, #b>
    %bm = kiln.local_load %rb[%s] : !kiln.shared<3x32x128xf32> -> tensor<32x128xf32, #b>
    %d = kiln.dot %a, %bm, %acc {tf32} : tensor<128x32xf32, #b>, tensor<32x128xf32, #b> -> tensor<128x128xf32, #b>
    return %d : tensor<128x128xf32, #b>
  }
}

// -----

// B transposed from a ring (N x K, K contiguous) is read in place.
// Without tf32, or with K = 16 (rows of 64 bytes, not a whole swizzle
// panel), f32 products keep the FMA loop.
// CHECK-DAG: #[[V3:mma[0-9]*]] = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
// CHECK-DAG: #[[SA:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 8>
// CHECK-DAG: #[[ST2:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = true, warps = 8>
// CHECK-LABEL: func.func @test_tf32_transposed
// CHECK: %[[A2:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x128x32xf32> -> tensor<128x32xf32, #[[SA]]>
// CHECK: %[[BT2:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x128x32xf32> -> tensor<128x32xf32, #[[SA]]>
// CHECK: %[[T2:.*]] = kiln.trans %[[BT2]] : tensor<128x32xf32, #[[SA]]> -> tensor<32x128xf32, #[[ST2]]>
// CHECK-NOT: kiln.convert_layout %[[T2]]
// CHECK: kiln.dot %[[A2]], %[[T2]], %{{.*}} {tf32} : {{.*}} -> tensor<128x128xf32, #[[V3]]>
// CHECK-LABEL: func.func @test_ieee_and_short_k
// CHECK-NOT: #kiln.mma
// CHECK: kiln.dot {{.*}} -> tensor<128x128xf32, #blocked>
// CHECK: kiln.dot {{.*}} {tf32} : {{.*}} -> tensor<128x128xf32, #blocked>
#b = #kiln.blocked<vec = 4, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_tf32_transposed(%acc: tensor<128x128xf32, #b>, %s: i32) -> tensor<128x128xf32, #b> attributes {kiln.kernel} {
    %ra = kiln.local_alloc : !kiln.shared<3x128x32xf32>
    %rb = kiln.local_alloc : !kiln.shared<3x128x32xf32>
    %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x32xf32> -> tensor<128x32xf32, #b>
    %bt = kiln.local_load %rb[%s] : !kiln.shared<3x128x32xf32> -> tensor<128x32xf32, #b>
    %t = kiln.trans %bt : tensor<128x32xf32, #b> -> tensor<32x128xf32, #b>
    %d = kiln.dot %a, %t, %acc {tf32} : tensor<128x32xf32, #b>, tensor<32x128xf32, #b> -> tensor<128x128xf32, #b>
    return %d : tensor<128x128xf32, #b>
  }
  func.func @test_ieee_and_short_k(%a: tensor<128x32xf32, #b>, %bm: tensor<32x128xf32, #b>, %a16: tensor<128x16xf32, #b>, %b16: tensor<16x128xf32, #b>, %acc: tensor<128x128xf32, #b>) -> (tensor<128x128xf32, #b>, tensor<128x128xf32, #b>) attributes {kiln.kernel} {
    %d = kiln.dot %a, %bm, %acc : tensor<128x32xf32, #b>, tensor<32x128xf32, #b> -> tensor<128x128xf32, #b>
    %e = kiln.dot %a16, %b16, %acc {tf32} : tensor<128x16xf32, #b>, tensor<16x128xf32, #b> -> tensor<128x128xf32, #b>
    return %d, %e : tensor<128x128xf32, #b>, tensor<128x128xf32, #b>
  }
}
