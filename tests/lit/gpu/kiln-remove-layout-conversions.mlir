// RUN: kiln-opt %s -split-input-file -kiln-remove-layout-conversions | FileCheck %s

// Element-wise ops on a product's result are computed in its accumulator
// layout, and the loop carries the accumulator in it: the one conversion
// left is after the loop.
// CHECK-DAG: #[[B:blocked[0-9]*]] = #kiln.blocked<vec = 8, warps = 4>
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-LABEL: func.func @test_loop_carried
// CHECK: %[[R:.*]] = scf.for {{.*}} -> (tensor<64x64xf32, #[[MMA]]>)
// CHECK-NOT: kiln.convert_layout
// CHECK: arith.mulf %{{.*}}, %{{.*}} : tensor<64x64xf32, #[[MMA]]>
// CHECK: arith.addf %{{.*}}, %{{.*}} : tensor<64x64xf32, #[[MMA]]>
// CHECK: scf.yield
// CHECK: kiln.convert_layout %[[R]] : tensor<64x64xf32, #[[MMA]]> -> tensor<64x64xf32, #[[B]]>
#b = #kiln.blocked<vec = 8, warps = 4>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
#s = #kiln.shared<swizzle = true, transposed = false, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_loop_carried(%q: tensor<64x64xf16, #s>, %k: tensor<64x64xf16, #s>, %n: i32, %scale: f32) -> tensor<64x64xf32, #b> attributes {kiln.kernel} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.0> : tensor<64x64xf32, #b>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32, #b>) : i32 {
      %d = kiln.dot %q, %k, %z : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
      %dc = kiln.convert_layout %d : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
      %sc = kiln.splat %scale : tensor<64x64xf32, #b>
      %x = arith.mulf %dc, %sc : tensor<64x64xf32, #b>
      %next = arith.addf %acc, %x : tensor<64x64xf32, #b>
      scf.yield %next : tensor<64x64xf32, #b>
    }
    return %r : tensor<64x64xf32, #b>
  }
}

// -----

// A reduction along the accumulator's rows leaves a row slice of it;
// expand_dims keeps it and broadcasting it back along the rows is the
// accumulator layout again: softmax's numerator never leaves the registers.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-DAG: #[[ROWS:slice[0-9]*]] = #kiln.slice<dim = 1, parent = #[[MMA]]>
// CHECK-LABEL: func.func @test_row_slices
// CHECK-SAME: (%[[D:.*]]: tensor<64x64xf32, #[[MMA]]>)
// CHECK: %[[M:.*]] = kiln.reduce max %[[D]] axis 1 : tensor<64x64xf32, #[[MMA]]> -> tensor<64xf32, #[[ROWS]]>
// CHECK: %[[ME:.*]] = kiln.expand_dims %[[M]] {axis = 1 : i32} : tensor<64xf32, #[[ROWS]]> -> tensor<64x1xf32, #[[ROWS]]>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[ME]] : tensor<64x1xf32, #[[ROWS]]> -> tensor<64x64xf32, #[[MMA]]>
// CHECK: %[[X:.*]] = arith.subf %[[D]], %[[MB]] : tensor<64x64xf32, #[[MMA]]>
// CHECK: %[[E:.*]] = math.exp %[[X]] : tensor<64x64xf32, #[[MMA]]>
// CHECK: kiln.convert_layout %[[E]] : tensor<64x64xf32, #[[MMA]]> -> tensor<64x64xf32, #blocked>
#b = #kiln.blocked<vec = 8, warps = 4>
#r = #kiln.replicated<warps = 4>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_row_slices(%d: tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #b> attributes {kiln.kernel} {
    %dc = kiln.convert_layout %d : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
    %m = kiln.reduce max %dc axis 1 : tensor<64x64xf32, #b> -> tensor<64xf32, #r>
    %me = kiln.expand_dims %m {axis = 1 : i32} : tensor<64xf32, #r> -> tensor<64x1xf32, #r>
    %mb = kiln.broadcast %me : tensor<64x1xf32, #r> -> tensor<64x64xf32, #b>
    %x = arith.subf %dc, %mb : tensor<64x64xf32, #b>
    %e = math.exp %x : tensor<64x64xf32, #b>
    return %e : tensor<64x64xf32, #b>
  }
}

// -----

// The probabilities, in an accumulator whose warps hold whole rows, are the
// A operand of the next product as they are: from registers, not through
// shared memory.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-DAG: #[[A:dot_op[0-9]*]] = #kiln.dot_operand<index = 0, parent = #[[MMA]]>
// CHECK-LABEL: func.func @test_a_from_registers
// CHECK: %[[P:.*]] = kiln.cast %{{.*}} : tensor<64x64xf32, #[[MMA]]> to tensor<64x64xf16, #[[MMA]]>
// CHECK: %[[PA:.*]] = kiln.convert_layout %[[P]] : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #[[A]]>
// CHECK: kiln.dot %[[PA]], %{{.*}}, %{{.*}} : tensor<64x64xf16, #[[A]]>, tensor<64x64xf16, #shared> -> tensor<64x64xf32, #[[MMA]]>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
#s = #kiln.shared<swizzle = true, transposed = false, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_a_from_registers(%p: tensor<64x64xf32, #mma>, %v: tensor<64x64xf16, #s>) -> tensor<64x64xf32, #mma> attributes {kiln.kernel} {
    %ph = kiln.cast %p : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    %pa = kiln.convert_layout %ph : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #s>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
    %o = kiln.dot %pa, %v, %z : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma>
    return %o : tensor<64x64xf32, #mma>
  }
}

// -----

// Not from registers: the warps of the source split its columns (2x2), so
// its registers do not hold whole rows; the operand goes through shared memory.
// CHECK-LABEL: func.func @test_not_a_from_registers
// CHECK: kiln.convert_layout %{{.*}} : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #shared>
// CHECK-NOT: dot_operand
#mma = #kiln.mma<version = 2, warpsM = 2, warpsN = 2>
#mma1 = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
#s = #kiln.shared<swizzle = true, transposed = false, warps = 4>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_not_a_from_registers(%p: tensor<64x64xf16, #mma>, %v: tensor<64x64xf16, #s>) -> tensor<64x64xf32, #mma1> attributes {kiln.kernel} {
    %pa = kiln.convert_layout %p : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #s>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma1>
    %o = kiln.dot %pa, %v, %z : tensor<64x64xf16, #s>, tensor<64x64xf16, #s> -> tensor<64x64xf32, #mma1>
    return %o : tensor<64x64xf32, #mma1>
  }
}

// -----

// A bias row broadcast along the rows and added to an accumulator is
// computed in the accumulator's column slice: each thread computes the
// addresses of, loads and widens only its own columns; the broadcast is the
// accumulator layout, and no conversion is left.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
// CHECK-DAG: #[[COLS:slice[0-9]*]] = #kiln.slice<dim = 0, parent = #[[MMA]]>
// CHECK-LABEL: func.func @test_bias_columns
// CHECK: %[[RN:.*]] = kiln.make_range 0 to 128 : tensor<128xi32, #[[COLS]]>
// CHECK: %[[IN:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : tensor<128xi32, #[[COLS]]>
// CHECK: %[[P:.*]] = kiln.addptr %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f16>, #[[COLS]]>, tensor<128xi32, #[[COLS]]>
// CHECK: %[[L:.*]] = kiln.load %[[P]], %[[IN]], %{{.*}} : tensor<128x!kiln.ptr<f16>, #[[COLS]]>
// CHECK: %[[W:.*]] = kiln.cast %[[L]] : tensor<128xf16, #[[COLS]]> to tensor<128xf32, #[[COLS]]>
// CHECK: %[[E:.*]] = kiln.expand_dims %[[W]] {axis = 0 : i32} : tensor<128xf32, #[[COLS]]> -> tensor<1x128xf32, #[[COLS]]>
// CHECK: %[[B:.*]] = kiln.broadcast %[[E]] : tensor<1x128xf32, #[[COLS]]> -> tensor<128x128xf32, #[[MMA]]>
// CHECK: arith.addf %{{.*}}, %[[B]] : tensor<128x128xf32, #[[MMA]]>
// CHECK-NOT: kiln.convert_layout
// CHECK: return
#r = #kiln.replicated<warps = 8>
#b = #kiln.blocked<vec = 4, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_bias_columns(%acc: tensor<128x128xf32, #mma>, %bias: !kiln.ptr<f16>, %n: i32) -> tensor<128x128xf32, #mma> attributes {kiln.kernel} {
    %rn = kiln.make_range 0 to 128 : tensor<128xi32, #r>
    %ns = kiln.splat %n : tensor<128xi32, #r>
    %in = arith.cmpi slt, %rn, %ns : tensor<128xi32, #r>
    %base = kiln.splat %bias : tensor<128x!kiln.ptr<f16>, #r>
    %p = kiln.addptr %base, %rn : tensor<128x!kiln.ptr<f16>, #r>, tensor<128xi32, #r>
    %zero = arith.constant dense<0.0> : tensor<128xf16, #r>
    %l = kiln.load %p, %in, %zero : tensor<128x!kiln.ptr<f16>, #r>
    %w = kiln.cast %l : tensor<128xf16, #r> to tensor<128xf32, #r>
    %e = kiln.expand_dims %w {axis = 0 : i32} : tensor<128xf32, #r> -> tensor<1x128xf32, #r>
    %bb = kiln.broadcast %e : tensor<1x128xf32, #r> -> tensor<128x128xf32, #b>
    %bm = kiln.convert_layout %bb : tensor<128x128xf32, #b> -> tensor<128x128xf32, #mma>
    %out = arith.addf %acc, %bm : tensor<128x128xf32, #mma>
    return %out : tensor<128x128xf32, #mma>
  }
}

// -----

// A row also used elsewhere is not loaded twice: it stays replicated and is
// converted.
// CHECK-LABEL: func.func @test_bias_shared_row
// CHECK: kiln.load %{{.*}} : tensor<128x!kiln.ptr<f16>, #replicated>
// CHECK-NOT: kiln.load
// CHECK: kiln.convert_layout %{{.*}} -> tensor<128x128xf16, #mma>
#r = #kiln.replicated<warps = 8>
#b = #kiln.blocked<vec = 4, warps = 8>
#mma = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>
module attributes {kiln.num_warps = 8 : i32} {
  func.func @test_bias_shared_row(%acc: tensor<128x128xf16, #mma>, %bias: !kiln.ptr<f16>) -> (tensor<128x128xf16, #mma>, tensor<128xf16, #r>) attributes {kiln.kernel} {
    %rn = kiln.make_range 0 to 128 : tensor<128xi32, #r>
    %base = kiln.splat %bias : tensor<128x!kiln.ptr<f16>, #r>
    %p = kiln.addptr %base, %rn : tensor<128x!kiln.ptr<f16>, #r>, tensor<128xi32, #r>
    %l = kiln.load %p : tensor<128x!kiln.ptr<f16>, #r>
    %e = kiln.expand_dims %l {axis = 0 : i32} : tensor<128xf16, #r> -> tensor<1x128xf16, #r>
    %bb = kiln.broadcast %e : tensor<1x128xf16, #r> -> tensor<128x128xf16, #b>
    %bm = kiln.convert_layout %bb : tensor<128x128xf16, #b> -> tensor<128x128xf16, #mma>
    %out = arith.addf %acc, %bm : tensor<128x128xf16, #mma>
    return %out, %l : tensor<128x128xf16, #mma>, tensor<128xf16, #r>
  }
}

// -----

// A tile loaded only to be added to an accumulator (a residual, widened to
// f32 first) is loaded in the accumulator layout: its addresses and mask
// are converted (the lowering recomputes them at each element), the loaded
// values are not.
// CHECK-DAG: #[[MMA:mma[0-9]*]] = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
// CHECK-LABEL: func.func @test_residual_in_accumulator
// CHECK: %[[P:.*]] = kiln.convert_layout %{{.*}} : tensor<64x64x!kiln.ptr<f16>, #blocked> -> tensor<64x64x!kiln.ptr<f16>, #[[MMA]]>
// CHECK: %[[M:.*]] = kiln.convert_layout %{{.*}} : tensor<64x64xi1, #blocked> -> tensor<64x64xi1, #[[MMA]]>
// CHECK: %[[L:.*]] = kiln.load %[[P]], %[[M]], %{{.*}} : tensor<64x64x!kiln.ptr<f16>, #[[MMA]]>
// CHECK: %[[W:.*]] = kiln.cast %[[L]] : tensor<64x64xf16, #[[MMA]]> to tensor<64x64xf32, #[[MMA]]>
// CHECK: arith.addf %{{.*}}, %[[W]] : tensor<64x64xf32, #[[MMA]]>
// CHECK-NOT: kiln.convert_layout
// CHECK: return
#r = #kiln.replicated<warps = 4>
#b = #kiln.blocked<vec = 8, warps = 4>
#mma = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>
module attributes {kiln.num_warps = 4 : i32} {
  func.func @test_residual_in_accumulator(%acc: tensor<64x64xf32, #mma>, %res: !kiln.ptr<f16>, %m: i32, %ld: i32) -> tensor<64x64xf32, #mma> attributes {kiln.kernel} {
    %rm = kiln.make_range 0 to 64 : tensor<64xi32, #r>
    %rows = kiln.expand_dims %rm {axis = 1 : i32} : tensor<64xi32, #r> -> tensor<64x1xi32, #r>
    %cols = kiln.expand_dims %rm {axis = 0 : i32} : tensor<64xi32, #r> -> tensor<1x64xi32, #r>
    %lds = kiln.splat %ld : tensor<64x1xi32, #r>
    %off = arith.muli %rows, %lds : tensor<64x1xi32, #r>
    %base = kiln.splat %res : tensor<64x1x!kiln.ptr<f16>, #r>
    %rowp = kiln.addptr %base, %off : tensor<64x1x!kiln.ptr<f16>, #r>, tensor<64x1xi32, #r>
    %rowb = kiln.broadcast %rowp : tensor<64x1x!kiln.ptr<f16>, #r> -> tensor<64x64x!kiln.ptr<f16>, #b>
    %colb = kiln.broadcast %cols : tensor<1x64xi32, #r> -> tensor<64x64xi32, #b>
    %p = kiln.addptr %rowb, %colb : tensor<64x64x!kiln.ptr<f16>, #b>, tensor<64x64xi32, #b>
    %ms = kiln.splat %m : tensor<64x1xi32, #r>
    %in = arith.cmpi slt, %rows, %ms : tensor<64x1xi32, #r>
    %mask = kiln.broadcast %in : tensor<64x1xi1, #r> -> tensor<64x64xi1, #b>
    %zero = arith.constant dense<0.0> : tensor<64x64xf16, #b>
    %l = kiln.load %p, %mask, %zero : tensor<64x64x!kiln.ptr<f16>, #b>
    %w = kiln.cast %l : tensor<64x64xf16, #b> to tensor<64x64xf32, #b>
    %wm = kiln.convert_layout %w : tensor<64x64xf32, #b> -> tensor<64x64xf32, #mma>
    %out = arith.addf %acc, %wm : tensor<64x64xf32, #mma>
    return %out : tensor<64x64xf32, #mma>
  }
}
