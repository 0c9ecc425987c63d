// RUN: kiln-opt %s -split-input-file -kiln-coalesce="num-warps=4" -kiln-accelerate-matmul -kiln-remove-layout-conversions -convert-kiln-to-gpu="num-warps=4" | FileCheck %s

// A scalar is held by every thread (128 here). Read-modify-write of one
// address: each thread loads, but only thread 0 stores, so the address is
// advanced once however the warps interleave (had every warp stored, one
// that loaded after another's store would advance it twice). The store is a
// predicated instruction rather than a branch, so nothing that computes the
// value is moved behind the predicate.
// CHECK-LABEL: gpu.func @test_scalar_store_owner
// CHECK-SAME: (%[[P:.*]]: i64, %[[A:.*]]: i32)
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[T:.*]] = arith.index_cast %[[TID]] : index to i32
// CHECK: %[[OLD:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: %[[NEW:.*]] = arith.addi %[[OLD]], %[[A]] : i32
// CHECK: %[[C0:.*]] = arith.constant 0 : i32
// CHECK: %[[OWNER:.*]] = arith.cmpi eq, %[[T]], %[[C0]] : i32
// CHECK: llvm.inline_asm has_side_effects "@$2 st.global.b32 [$0], $1;", "l,r,b" %[[P]], %[[NEW]], %[[OWNER]] : (i64, i32, i1) -> ()
// CHECK-NOT: llvm.store
// CHECK-NOT: scf.if
// CHECK: gpu.return
func.func @test_scalar_store_owner(%p: !kiln.ptr<i32>, %a: i32) attributes {kiln.kernel} {
  %v = kiln.load %p : !kiln.ptr<i32>
  %s = arith.addi %v, %a : i32
  kiln.store %p, %s : !kiln.ptr<i32>
  return
}

// -----

// A tile of 8 elements over 128 threads is replicated: every thread holds
// all 8, and thread 0 stores each of them, under its mask bit.
// CHECK-LABEL: gpu.func @test_replicated_tile_store_owner
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[T:.*]] = arith.index_cast %[[TID]] : index to i32
// CHECK: %[[M0:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK: %[[OWNER:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : i32
// CHECK: %[[PRED0:.*]] = arith.andi %[[M0]], %[[OWNER]] : i1
// CHECK: %[[V0:.*]] = llvm.bitcast %{{.*}} : f32 to i32
// CHECK: llvm.inline_asm has_side_effects "@$2 st.global.b32 [$0], $1;", "l,r,b" %{{.*}}, %[[V0]], %[[PRED0]] : (i64, i32, i1) -> ()
// CHECK-COUNT-7: arith.andi %{{.*}}, %[[OWNER]] : i1
// CHECK-NOT: llvm.store
// CHECK-NOT: scf.if
// CHECK: gpu.return
func.func @test_replicated_tile_store_owner(%x: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 8 : tensor<8xi32>
  %ns = kiln.splat %n : tensor<8xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<8xi32>
  %xs = kiln.splat %x : tensor<8x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  %v = kiln.load %p, %m : tensor<8x!kiln.ptr<f32>>
  %one = arith.constant dense<1.0> : tensor<8xf32>
  %e = arith.addf %v, %one : tensor<8xf32>
  kiln.store %p, %e, %m : tensor<8x!kiln.ptr<f32>>
  return
}

// -----

// 16-bit elements are stored from 16-bit registers; a 2-D tile of 2 x 4
// elements is replicated like a 1-D one.
// CHECK-LABEL: gpu.func @test_replicated_f16_store_owner
// CHECK: %[[OWNER:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i32
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "@$2 st.global.b16 [$0], $1;", "l,h,b" %{{.*}}, %{{.*}}, %[[OWNER]] : (i64, i16, i1) -> ()
// CHECK-NOT: llvm.store
// CHECK: gpu.return
func.func @test_replicated_f16_store_owner(%x: !kiln.ptr<f16>, %y: !kiln.ptr<f16>) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 8 : tensor<8xi32>
  %xs = kiln.splat %x : tensor<8x!kiln.ptr<f16>>
  %p = kiln.addptr %xs, %r : tensor<8x!kiln.ptr<f16>>, tensor<8xi32>
  %v = kiln.load %p : tensor<8x!kiln.ptr<f16>>
  %v2 = kiln.reshape %v : tensor<8xf16> -> tensor<2x4xf16>
  %ys = kiln.splat %y : tensor<8x!kiln.ptr<f16>>
  %q = kiln.addptr %ys, %r : tensor<8x!kiln.ptr<f16>>, tensor<8xi32>
  %q2 = kiln.reshape %q : tensor<8x!kiln.ptr<f16>> -> tensor<2x4x!kiln.ptr<f16>>
  kiln.store %q2, %v2 : tensor<2x4x!kiln.ptr<f16>>
  return
}

// -----

// A distributed tile has one holder per element: no owner predicate, and the
// 16-byte vector store (with its element fallback) is as before.
// CHECK-LABEL: gpu.func @test_not_owner_distributed_store
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[T:.*]] = arith.index_cast %[[TID]] : index to i32
// CHECK-NOT: arith.cmpi eq, %[[T]]
// CHECK-NOT: st.global
// CHECK: arith.addf
// CHECK: %[[FAST:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK-NEXT: scf.if %[[FAST]] {
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: } else {
// CHECK-COUNT-4: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK-NOT: arith.cmpi eq, %[[T]]
// CHECK-NOT: st.global
// CHECK: gpu.return
func.func @test_not_owner_distributed_store(%x: !kiln.ptr<f32>, %n: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 512 : tensor<512xi32>
  %ns = kiln.splat %n : tensor<512xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<512xi32>
  %xs = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %p = kiln.addptr %xs, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %v = kiln.load %p, %m : tensor<512x!kiln.ptr<f32>>
  %one = arith.constant dense<1.0> : tensor<512xf32>
  %e = arith.addf %v, %one : tensor<512xf32>
  kiln.store %p, %e, %m : tensor<512x!kiln.ptr<f32>>
  return
}

// -----

// A tile of exactly one element per thread is distributed too, even when the
// value stored is a splat that every thread holds as one value.
// CHECK-LABEL: gpu.func @test_not_owner_one_each
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[T:.*]] = arith.index_cast %[[TID]] : index to i32
// CHECK-NOT: arith.cmpi eq, %[[T]]
// CHECK-NOT: st.global
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// CHECK-NOT: st.global
// CHECK: gpu.return
func.func @test_not_owner_one_each(%x: !kiln.ptr<i32>, %a: i32) attributes {kiln.kernel} {
  %r = kiln.make_range 0 to 128 : tensor<128xi32>
  %xs = kiln.splat %x : tensor<128x!kiln.ptr<i32>>
  %p = kiln.addptr %xs, %r : tensor<128x!kiln.ptr<i32>>, tensor<128xi32>
  %v = kiln.splat %a : tensor<128xi32>
  kiln.store %p, %v : tensor<128x!kiln.ptr<i32>>
  return
}
