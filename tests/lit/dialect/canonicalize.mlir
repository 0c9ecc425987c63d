// RUN: kiln-opt %s -split-input-file -canonicalize | FileCheck %s

// x + dot(a, b, 0) accumulates onto x; the product moves down to where x is
// available.
// CHECK-LABEL: func.func @accumulate_into_dot
// CHECK-SAME: (%[[A:.*]]: tensor<16x16xf16>, %[[B:.*]]: tensor<16x16xf16>, %[[ACC:.*]]: tensor<16x16xf32>, %[[S:.*]]: tensor<16x16xf32>)
// CHECK-NEXT: %[[X:.*]] = arith.mulf %[[ACC]], %[[S]]
// CHECK-NEXT: %[[D:.*]] = kiln.dot %[[A]], %[[B]], %[[X]]
// CHECK-NEXT: return %[[D]]
func.func @accumulate_into_dot(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %acc: tensor<16x16xf32>,
                               %s: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %d = kiln.dot %a, %b, %zero : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  %x = arith.mulf %acc, %s : tensor<16x16xf32>
  %r = arith.addf %x, %d : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// Not when the product has another use, or accumulates onto something else.
// CHECK-LABEL: func.func @no_accumulate
// CHECK: %[[D:.*]] = kiln.dot %{{.*}}, %{{.*}}, %{{.*}}
// CHECK: arith.addf %{{.*}}, %[[D]]
// CHECK: %[[E:.*]] = kiln.dot %{{.*}}, %{{.*}}, %{{.*}}
// CHECK: arith.addf %{{.*}}, %[[E]]
func.func @no_accumulate(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %x: tensor<16x16xf32>)
    -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %d = kiln.dot %a, %b, %zero : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  %r = arith.addf %x, %d : tensor<16x16xf32>
  %e = kiln.dot %a, %b, %x : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  %s = arith.addf %x, %e : tensor<16x16xf32>
  return %r, %d, %s : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

// Nor when the product would have to move past an op with memory effects.
// CHECK-LABEL: func.func @no_accumulate_across_effects
// CHECK: %[[D:.*]] = kiln.dot %{{.*}}, %{{.*}}, %{{.*}}
// CHECK: kiln.store
// CHECK: arith.addf %{{.*}}, %[[D]]
func.func @no_accumulate_across_effects(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %acc: tensor<16x16xf32>,
                                        %p: !kiln.ptr<f32>, %v: f32) -> tensor<16x16xf32> {
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %d = kiln.dot %a, %b, %zero : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  kiln.store %p, %v : !kiln.ptr<f32>
  %x = arith.mulf %acc, %acc : tensor<16x16xf32>
  %r = arith.addf %x, %d : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}
