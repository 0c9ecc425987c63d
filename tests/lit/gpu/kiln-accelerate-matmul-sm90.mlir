// RUN: kiln-opt %s -split-input-file -kiln-accelerate-matmul="arch=sm_90a" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-accelerate-matmul="arch=sm_80" | FileCheck %s --check-prefix=SM80

// On sm_90a, a product whose A and B are read in place from rings, with
// 64 rows per warpgroup (128 rows over 8 warps), runs on wgmma: the
// accumulator is #kiln.mma<version = 3>, every warp on rows. sm_80 splits
// the same product into the most square warp regions for mma.sync.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
// CHECK-DAG: #[[S:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 8>
// CHECK-LABEL: func.func @test_wgmma
// CHECK: %[[A:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x128x64xf16> -> tensor<128x64xf16, #[[S]]>
// CHECK: %[[B:.*]] = kiln.local_load %{{.*}}[%{{.*}}] : <3x64x256xf16> -> tensor<64x256xf16, #[[S]]>
// CHECK: kiln.dot %[[A]], %[[B]], %{{.*}} : tensor<128x64xf16, #[[S]]>, tensor<64x256xf16, #[[S]]> -> tensor<128x256xf32, #[[MMA]]>
// SM80: #kiln.mma<version = 2, warpsM = 2, warpsN = 4>
#b = #kiln.blocked<vec = 8, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_wgmma(%acc: tensor<128x256xf32, #b>, %s: i32) -> tensor<128x256xf32, #b> attributes {kiln.kernel} {
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x64x256xf16>
    %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #b>
    %bm = kiln.local_load %rb[%s] : !kiln.shared<3x64x256xf16> -> tensor<64x256xf16, #b>
    %d = kiln.dot %a, %bm, %acc : tensor<128x64xf16, #b>, tensor<64x256xf16, #b> -> tensor<128x256xf32, #b>
    return %d : tensor<128x256xf32, #b>
  }
}

// -----

// B read transposed (A @ B^T with B's rows 128 bytes of K) is wgmma's own
// orientation. An A that is not in a ring is converted to shared memory
// (staged there by the product) and read by wgmma too; K = 32 (rows of 64
// bytes, not whole 128-byte swizzle panels) keeps mma.sync.
// CHECK-DAG: #[[V3:mma[0-9]*]] = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
// CHECK-DAG: #[[V2:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 2, warpsN = 4>
// CHECK-DAG: #[[ST:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = true, warps = 8>
// CHECK-LABEL: func.func @test_wgmma_transposed
// CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x64xf16, #{{.*}}>, tensor<64x128xf16, #[[ST]]> -> tensor<128x128xf32, #[[V3]]>
// CHECK-LABEL: func.func @test_not_in_place
// CHECK: %[[QS:.*]] = kiln.convert_layout %{{.*}} : tensor<128x64xf16, #{{.*}}> -> tensor<128x64xf16, #{{.*}}>
// CHECK: kiln.dot %[[QS]], {{.*}} -> tensor<128x128xf32, #[[V3]]>
// CHECK: kiln.dot {{.*}} -> tensor<128x128xf32, #[[V2]]>
#b = #kiln.blocked<vec = 8, warps = 8>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_wgmma_transposed(%acc: tensor<128x128xf32, #b>, %s: i32) -> tensor<128x128xf32, #b> attributes {kiln.kernel} {
    %ra = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %rb = kiln.local_alloc : !kiln.shared<3x128x64xf16>
    %a = kiln.local_load %ra[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #b>
    %bt = kiln.local_load %rb[%s] : !kiln.shared<3x128x64xf16> -> tensor<128x64xf16, #b>
    %t = kiln.trans %bt : tensor<128x64xf16, #b> -> tensor<64x128xf16, #b>
    %d = kiln.dot %a, %t, %acc : tensor<128x64xf16, #b>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #b>
    return %d : tensor<128x128xf32, #b>
  }
  func.func @test_not_in_place(%q: tensor<128x64xf16, #b>, %acc: tensor<128x128xf32, #b>, %acc32: tensor<128x128xf32, #b>, %s: i32) -> (tensor<128x128xf32, #b>, tensor<128x128xf32, #b>) attributes {kiln.kernel} {
    %rb = kiln.local_alloc : !kiln.shared<3x64x128xf16>
    %bm = kiln.local_load %rb[%s] : !kiln.shared<3x64x128xf16> -> tensor<64x128xf16, #b>
    %d = kiln.dot %q, %bm, %acc : tensor<128x64xf16, #b>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #b>
    %ra = kiln.local_alloc : !kiln.shared<3x128x32xf16>
    %rc = kiln.local_alloc : !kiln.shared<3x32x128xf16>
    %a32 = kiln.local_load %ra[%s] : !kiln.shared<3x128x32xf16> -> tensor<128x32xf16, #b>
    %b32 = kiln.local_load %rc[%s] : !kiln.shared<3x32x128xf16> -> tensor<32x128xf16, #b>
    %e = kiln.dot %a32, %b32, %acc32 : tensor<128x32xf16, #b>, tensor<32x128xf16, #b> -> tensor<128x128xf32, #b>
    return %d, %e : tensor<128x128xf32, #b>, tensor<128x128xf32, #b>
  }
}
