// RUN: kiln-opt %s -split-input-file -kiln-pipeline-loads="num-stages=3" -canonicalize | FileCheck %s

// A dot operand goes through a ring of num-stages buffers: iterations 0 and
// 1 are copied before the loop; iteration k waits for its own copy (one
// group may stay in flight), copies iteration k + 32 into the buffer that
// iteration k - 16 read, and reads buffer (k / 16) % 3. Copies past the end
// are masked off; the loop is drained after.
// CHECK-LABEL: func.func @test_prefetch
// CHECK: %[[RING:.*]] = kiln.local_alloc : <3x16x16xf16>
// CHECK: %[[IN0:.*]] = arith.cmpi sgt, %[[K:.*]], %c0_i32 : i32
// CHECK: %[[G0:.*]] = kiln.splat %[[IN0]] : tensor<16x16xi1>
// CHECK: %[[M0:.*]] = arith.andi %{{.*}}, %[[G0]]
// CHECK: kiln.async_copy %{{.*}}, %[[RING]][%c0_i32], %[[M0]]
// CHECK-NEXT: kiln.async_commit
// CHECK: kiln.async_copy %{{.*}}, %[[RING]][%c1_i32]
// CHECK-NEXT: kiln.async_commit
// CHECK: scf.for %[[IV:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: %[[I:.*]] = arith.divsi %[[IV]], %c16_i32
// CHECK: %[[STAGE:.*]] = arith.remsi %[[I]], %c3_i32
// CHECK: %[[I2:.*]] = arith.addi %[[I]], %c2_i32
// CHECK: %[[AHEAD:.*]] = arith.remsi %[[I2]], %c3_i32
// CHECK: kiln.async_wait {pending = 1 : i32}
// CHECK: %[[NEXT:.*]] = arith.addi %[[IV]], %c32_i32
// CHECK: arith.cmpi slt, %[[NEXT]], %[[K]]
// CHECK: kiln.async_copy %{{.*}}, %[[RING]][%[[AHEAD]]]
// CHECK-NEXT: kiln.async_commit
// CHECK: %[[T:.*]] = kiln.local_load %[[RING]][%[[STAGE]]] : <3x16x16xf16> -> tensor<16x16xf16>
// CHECK: %[[D:.*]] = kiln.dot %[[T]], %{{.*}}, %[[ACC]]
// CHECK: scf.yield %[[D]]
// CHECK: kiln.async_wait {pending = 0 : i32}
func.func @test_prefetch(%a: !kiln.ptr<f16>, %K: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %b = arith.constant dense<1.0> : tensor<16x16xf16>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %Ks = kiln.splat %K : tensor<16x16xi32>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %m = arith.cmpi slt, %off, %Ks : tensor<16x16xi32>
    %t = kiln.load %p, %m : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %t, %b, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %res : tensor<16x16xf32>
}

// -----

// A load whose address depends on a loop-carried value cannot be issued early.
// CHECK-LABEL: func.func @test_not_carried_address
// CHECK-NOT: kiln.load
// CHECK: scf.for
// CHECK: kiln.load
// CHECK: kiln.dot
// CHECK: scf.yield
func.func @test_not_carried_address(%a: !kiln.ptr<f16>, %n: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%p = %pa, %acc = %zero) -> (tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xf32>) : i32 {
    %v = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %v, %v, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    %ones = arith.constant dense<1> : tensor<16x16xi32>
    %q = kiln.addptr %p, %ones : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    scf.yield %q, %d : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xf32>
  }
  return %r#1 : tensor<16x16xf32>
}

// -----

// Streaming loops (no dot) are left alone.
// CHECK-LABEL: func.func @test_not_streaming
// CHECK-NOT: kiln.load
// CHECK: scf.for
// CHECK: kiln.load
func.func @test_not_streaming(%a: !kiln.ptr<f32>, %n: i32) -> f32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %z) -> (f32) : i32 {
    %p = kiln.addptr %a, %k : !kiln.ptr<f32>, i32
    %v = kiln.load %p : !kiln.ptr<f32>
    %t = arith.addf %s, %v : f32
    scf.yield %t : f32
  }
  return %r : f32
}

// -----

// A load that is not a dot operand is prefetched into registers one
// iteration ahead and carried as an iteration argument.
// CHECK-LABEL: func.func @test_register_prefetch
// CHECK: %[[FIRST:.*]] = kiln.load
// CHECK: scf.for %[[IV:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[CUR:.*]] = %[[FIRST]])
// CHECK: %[[NEXT:.*]] = arith.addi %[[IV]], %c16_i32 : i32
// CHECK: %[[NEXT_TILE:.*]] = kiln.load
// CHECK: %[[D:.*]] = kiln.dot
// CHECK: %[[S:.*]] = arith.addf %[[D]], %[[CUR]]
// CHECK: scf.yield %[[S]], %[[NEXT_TILE]]
func.func @test_register_prefetch(%a: !kiln.ptr<f32>, %K: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %b = arith.constant dense<1.0> : tensor<16x16xf16>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f32>>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f32>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f32>>
    %d = kiln.dot %b, %b, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    %s = arith.addf %d, %t : tensor<16x16xf32>
    scf.yield %s : tensor<16x16xf32>
  }
  return %res : tensor<16x16xf32>
}

// -----

// One stage disables the pass.
// RUN: kiln-opt %s -split-input-file -kiln-pipeline-loads="num-stages=1" | FileCheck %s --check-prefix=ONE
// ONE-LABEL: func.func @test_one_stage
// ONE-NOT: kiln.async_copy
// ONE-NOT: kiln.local_alloc
// ONE: kiln.load
func.func @test_one_stage(%a: !kiln.ptr<f16>, %K: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %p = kiln.addptr %pa, %ks : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %t, %t, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %res : tensor<16x16xf32>
}

// -----

// A product operand loaded before the loops that use it (attention's
// queries) is copied once into a one-buffer ring, read in place by every
// product; it is waited for just before the first loop, with the copies of
// that loop's first stages still in flight.
// CHECK-LABEL: func.func @test_invariant_operand
// CHECK: %[[Q:.*]] = kiln.local_alloc : <1x16x16xf16>
// CHECK: kiln.async_copy %{{.*}}, %[[Q]][%c0_i32], %{{.*}}
// CHECK-NEXT: kiln.async_commit
// CHECK-NOT: kiln.load
// CHECK: kiln.async_commit
// CHECK: kiln.async_commit
// CHECK-NEXT: kiln.async_wait {pending = 2 : i32}
// CHECK-NEXT: %[[QT:.*]] = kiln.local_load %[[Q]][%c0_i32] : <1x16x16xf16> -> tensor<16x16xf16>
// CHECK-NEXT: scf.for
// CHECK: kiln.dot %[[QT]]
// CHECK: scf.for
// CHECK: kiln.dot %[[QT]]
func.func @test_invariant_operand(%a: !kiln.ptr<f16>, %q: !kiln.ptr<f16>, %K: i32, %n: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %ns = kiln.splat %n : tensor<16x16xi32>
  %qm = arith.cmpi slt, %rowb, %ns : tensor<16x16xi32>
  %pq = kiln.splat %q : tensor<16x16x!kiln.ptr<f16>>
  %pqo = kiln.addptr %pq, %rowb : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
  %qt = kiln.load %pqo, %qm : tensor<16x16x!kiln.ptr<f16>>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %first = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %qt, %t, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  %second = scf.for %k = %K to %n step %c16 iter_args(%acc = %first) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %qt, %t, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %second : tensor<16x16xf32>
}

// -----

// A tile loaded before the loop but also used after it stays a load.
// CHECK-LABEL: func.func @test_invariant_used_outside
// CHECK: kiln.load %{{.*}} : tensor<16x16x!kiln.ptr<f16>>
// CHECK-NOT: <1x16x16xf16>
// CHECK: scf.for
func.func @test_invariant_used_outside(%a: !kiln.ptr<f16>, %q: !kiln.ptr<f16>, %K: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %pq = kiln.splat %q : tensor<16x16x!kiln.ptr<f16>>
  %pqo = kiln.addptr %pq, %rowb : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
  %qt = kiln.load %pqo : tensor<16x16x!kiln.ptr<f16>>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %qt, %t, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  %again = kiln.dot %qt, %qt, %res : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  return %again : tensor<16x16xf32>
}

// -----

// A product before the loop that reads the same operand (a software-
// pipelined loop's first step) reads the one copy too, and its other
// operand, used by it alone, is copied once as well: the copies are waited
// for before that product.
// CHECK-LABEL: func.func @test_invariant_used_before
// CHECK: %[[Q:.*]] = kiln.local_alloc : <1x16x16xf16>
// CHECK: kiln.async_copy %{{.*}}, %[[Q]][%c0_i32], %{{.*}}
// CHECK-NEXT: kiln.async_commit
// CHECK: %[[T:.*]] = kiln.local_alloc : <1x16x16xf16>
// CHECK: kiln.async_copy %{{.*}}, %[[T]][%c0_i32]
// CHECK-NEXT: kiln.async_commit
// CHECK-NOT: kiln.load
// CHECK: kiln.async_wait {pending = 0 : i32}
// CHECK-DAG: %[[QT:.*]] = kiln.local_load %[[Q]][%c0_i32] : <1x16x16xf16> -> tensor<16x16xf16>
// CHECK-DAG: %[[TT:.*]] = kiln.local_load %[[T]][%c0_i32] : <1x16x16xf16> -> tensor<16x16xf16>
// CHECK: %[[PRE:.*]] = kiln.dot %[[QT]], %[[TT]]
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[PRE]])
// CHECK: kiln.dot %[[QT]]
func.func @test_invariant_used_before(%a: !kiln.ptr<f16>, %q: !kiln.ptr<f16>, %K: i32, %n: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %r = kiln.make_range 0 to 16 : tensor<16xi32>
  %row = kiln.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %rowb = kiln.broadcast %row : tensor<16x1xi32> -> tensor<16x16xi32>
  %ns = kiln.splat %n : tensor<16x16xi32>
  %qm = arith.cmpi slt, %rowb, %ns : tensor<16x16xi32>
  %pq = kiln.splat %q : tensor<16x16x!kiln.ptr<f16>>
  %pqo = kiln.addptr %pq, %rowb : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
  %qt = kiln.load %pqo, %qm : tensor<16x16x!kiln.ptr<f16>>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %t0 = kiln.load %pa : tensor<16x16x!kiln.ptr<f16>>
  %pre = kiln.dot %qt, %t0, %zero : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  %res = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %pre) -> (tensor<16x16xf32>) : i32 {
    %ks = kiln.splat %k : tensor<16x16xi32>
    %off = arith.addi %rowb, %ks : tensor<16x16xi32>
    %p = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %t = kiln.load %p : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %qt, %t, %acc : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %res : tensor<16x16xf32>
}
