// Round trip of the GPU layout attributes and kiln.convert_layout; printed
// IR names layouts with short aliases.
// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s -canonicalize | FileCheck %s --check-prefix=FOLD

// CHECK-DAG: #[[BLOCKED:blocked[0-9]*]] = #kiln.blocked<vec = 8, warps = 4>
// CHECK-DAG: #[[REPL:replicated[0-9]*]] = #kiln.replicated<warps = 4>
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-DAG: #[[ROWS:slice[0-9]*]] = #kiln.slice<dim = 1, parent = #[[MMA]]>
// CHECK-DAG: #[[A:dot_op[0-9]*]] = #kiln.dot_operand<index = 0, parent = #[[MMA]]>
// CHECK-DAG: #[[SHARED:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = false, warps = 4>
// CHECK-DAG: #[[SHAREDT:shared[0-9]*]] = #kiln.shared<swizzle = true, transposed = true, warps = 4>
#blocked = #kiln.blocked<vec = 8, warps = 4>
#replicated = #kiln.replicated<warps = 4>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
#rows = #kiln.slice<dim = 1, parent = #mma>
#a = #kiln.dot_operand<index = 0, parent = #mma>
#shared = #kiln.shared<swizzle = true, transposed = false, warps = 4>
#sharedT = #kiln.shared<swizzle = true, transposed = true, warps = 4>

// CHECK-LABEL: func.func @test_layouts
func.func @test_layouts(%acc: tensor<64x64xf32, #mma>, %p: tensor<64x64xf16, #mma>,
                        %k: tensor<64x64xf16, #shared>) {
  // CHECK: kiln.convert_layout %{{.*}} : tensor<64x64xf32, #[[MMA]]> -> tensor<64x64xf32, #[[BLOCKED]]>
  %0 = kiln.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  // CHECK: kiln.reduce max %{{.*}} axis 1 : tensor<64x64xf32, #[[MMA]]> -> tensor<64xf32, #[[ROWS]]>
  %1 = kiln.reduce max %acc axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #rows>
  // CHECK: kiln.expand_dims %{{.*}} {axis = 1 : i32} : tensor<64xf32, #[[ROWS]]> -> tensor<64x1xf32, #[[ROWS]]>
  %2 = kiln.expand_dims %1 {axis = 1 : i32} : tensor<64xf32, #rows> -> tensor<64x1xf32, #rows>
  // CHECK: kiln.broadcast %{{.*}} : tensor<64x1xf32, #[[ROWS]]> -> tensor<64x64xf32, #[[MMA]]>
  %3 = kiln.broadcast %2 : tensor<64x1xf32, #rows> -> tensor<64x64xf32, #mma>
  // CHECK: kiln.convert_layout %{{.*}} : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #[[A]]>
  %4 = kiln.convert_layout %p : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
  // CHECK: kiln.trans %{{.*}} : tensor<64x64xf16, #[[SHARED]]> -> tensor<64x64xf16, #[[SHAREDT]]>
  %5 = kiln.trans %k : tensor<64x64xf16, #shared> -> tensor<64x64xf16, #sharedT>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x64xf16, #[[A]]>, tensor<64x64xf16, #[[SHAREDT]]> -> tensor<64x64xf32, #[[MMA]]>
  %6 = kiln.dot %4, %5, %acc : tensor<64x64xf16, #a>, tensor<64x64xf16, #sharedT> -> tensor<64x64xf32, #mma>
  // CHECK: kiln.splat %{{.*}} : tensor<16xf32, #[[REPL]]>
  %s = arith.constant 1.0 : f32
  %7 = kiln.splat %s : tensor<16xf32, #replicated>
  return
}

// Conversions fold away: to the same layout, and there and back.
// FOLD-LABEL: func.func @test_convert_folds
// FOLD-SAME: (%[[ACC:.*]]: tensor<64x64xf32, #mma>)
// FOLD-NEXT: return %[[ACC]], %[[ACC]]
func.func @test_convert_folds(%acc: tensor<64x64xf32, #mma>) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>) {
  %0 = kiln.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #mma>
  %1 = kiln.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  %2 = kiln.convert_layout %1 : tensor<64x64xf32, #blocked> -> tensor<64x64xf32, #mma>
  return %0, %2 : tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>
}
