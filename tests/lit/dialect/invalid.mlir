// Verifier errors of the kiln dialect.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @test_not_range_length() {
  // expected-error @+1 {{result length 64 != end - start (128)}}
  %0 = kiln.make_range 0 to 128 : tensor<64xi32>
  return
}

// -----

func.func @test_not_empty_range() {
  // expected-error @+1 {{end (0) must be greater than start (4)}}
  %0 = kiln.make_range 4 to 0 : tensor<4xi32>
  return
}

// -----

func.func @test_not_broadcast(%t: tensor<64x2xf32>) {
  // expected-error @+1 {{dimension 1 of size 2 cannot broadcast to 128}}
  %0 = kiln.broadcast %t : tensor<64x2xf32> -> tensor<64x128xf32>
  return
}

// -----

func.func @test_not_broadcast_rank(%t: tensor<64xf32>) {
  // expected-error @+1 {{rank changes from 1 to 2; use kiln.expand_dims first}}
  %0 = kiln.broadcast %t : tensor<64xf32> -> tensor<64x128xf32>
  return
}

// -----

func.func @test_not_expand_dims(%t: tensor<64xf32>) {
  // expected-error @+1 {{result type 'tensor<1x64xf32>' != expected 'tensor<64x1xf32>'}}
  %0 = kiln.expand_dims %t {axis = 1 : i32} : tensor<64xf32> -> tensor<1x64xf32>
  return
}

// -----

func.func @test_not_reshape(%t: tensor<64xf32>) {
  // expected-error @+1 {{element count changes from 64 to 32}}
  %0 = kiln.reshape %t : tensor<64xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @test_not_addptr_shape(%p: tensor<4x!kiln.ptr<f32>>, %o: tensor<8xi32>) {
  // expected-error @+1 {{offset type 'tensor<8xi32>' does not have the shape of pointer type}}
  %0 = kiln.addptr %p, %o : tensor<4x!kiln.ptr<f32>>, tensor<8xi32>
  return
}

// -----

func.func @test_not_dot_k(%a: tensor<16x32xf16>, %b: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{K of lhs (32) != K of rhs (16)}}
  %0 = kiln.dot %a, %b, %c : tensor<16x32xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  return
}

// -----

func.func @test_not_dot_dtype(%a: tensor<16x16xf16>, %b: tensor<16x16xbf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{lhs element type 'f16' != rhs element type 'bf16'}}
  %0 = kiln.dot %a, %b, %c : tensor<16x16xf16>, tensor<16x16xbf16> -> tensor<16x16xf32>
  return
}

// -----

func.func @test_not_dot_tf32(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{tf32 applies to f32 operands, got 'f16'}}
  %0 = kiln.dot %a, %b, %c {tf32} : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  return
}

// -----

func.func @test_not_dot_acc(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %c: tensor<16x16xf16>) {
  // expected-error @+1 {{accumulator must be f32, got 'f16'}}
  %0 = kiln.dot %a, %b, %c : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf16>
  return
}

// -----

func.func @test_not_reduce_axis(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{axis 2 out of range for a rank-2 tile}}
  %0 = kiln.reduce sum %t axis 2 : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @test_not_reduce_result(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{result type 'tensor<8xf32>' != expected 'tensor<4xf32>'}}
  %0 = kiln.reduce max %t axis 1 : tensor<4x8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @test_not_argmax_type(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{result type 'tensor<8xi32>' != expected 'tensor<4xi32>'}}
  %0 = kiln.argmax %t axis 1 : tensor<4x8xf32> -> tensor<8xi32>
  return
}

// -----

func.func @test_not_cast_shape(%t: tensor<8xf32>) {
  // expected-error @+1 {{shape changes from 'tensor<8xf32>' to 'tensor<4xf16>'}}
  %0 = kiln.cast %t : tensor<8xf32> to tensor<4xf16>
  return
}

// -----

func.func @test_not_program_axis() {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint}}
  %0 = kiln.program_id 3 : i32
  return
}

// -----

// expected-error @+1 {{!kiln.ptr must point to a float or integer type, got 'index'}}
func.func @test_not_ptr_type(%p: !kiln.ptr<index>) {
  return
}

// -----

// expected-error @+1 {{!kiln.shared needs at least one stage, got 0}}
func.func @test_not_zero_stages(%r: !kiln.shared<0x16x16xf16>) {
  return
}

// -----

func.func @test_not_copy_into_other_shape(%p: tensor<16x16x!kiln.ptr<f16>>, %s: i32) {
  %ring = kiln.local_alloc : !kiln.shared<2x16x32xf16>
  // expected-error @+1 {{'kiln.async_copy' op copies 'tensor<16x16xf16>' into a ring of 'tensor<16x32xf16>'}}
  kiln.async_copy %p, %ring[%s] : tensor<16x16x!kiln.ptr<f16>>, !kiln.shared<2x16x32xf16>
  return
}

// -----

func.func @test_not_negative_pending() {
  // expected-error @+1 {{attribute 'pending' failed to satisfy constraint}}
  kiln.async_wait {pending = -1 : i32}
  return
}

// -----

func.func @test_atomic_add_not_i32(%c: !kiln.ptr<f32>, %v: i32) -> i32 {
  // expected-error @+1 {{needs a pointer to i32, got '!kiln.ptr<f32>'}}
  %old = kiln.atomic_add %c, %v : !kiln.ptr<f32>
  return %old : i32
}

// -----

func.func @test_atomic_accumulate_not_f32(%p: tensor<64x!kiln.ptr<f16>>, %v: tensor<64xf16>) {
  // expected-error @+1 {{needs pointers to f32, got 'tensor<64x!kiln.ptr<f16>>'}}
  kiln.atomic_accumulate %p, %v : tensor<64x!kiln.ptr<f16>>
  return
}

// -----

func.func @test_not_transpose(%t: tensor<64x32xf16>) {
  // expected-error @+1 {{result 'tensor<64x32xf16>' is not the transpose of 'tensor<64x32xf16>'}}
  %0 = kiln.trans %t : tensor<64x32xf16> -> tensor<64x32xf16>
  return
}

// -----

func.func @test_trans_rank(%t: tensor<64xf16>) {
  // expected-error @+1 {{expects a 2-D tile, got rank 1}}
  %0 = kiln.trans %t : tensor<64xf16> -> tensor<64xf16>
  return
}

// -----

// A zero extent cannot be lowered (the GPU lowering divides tiles among
// threads by their extents): it is rejected where it is made.
func.func @test_not_zero_extent_broadcast(%t: tensor<1x64xf32>) {
  // expected-error @+1 {{result #0 is a tile of type 'tensor<0x64xf32>'; every dimension of a tile must be static and non-zero}}
  %0 = kiln.broadcast %t : tensor<1x64xf32> -> tensor<0x64xf32>
  return
}

// -----

func.func @test_not_zero_extent_operand(%t: tensor<0x64xf32>) {
  // expected-error @+1 {{operand #0 is a tile of type 'tensor<0x64xf32>'; every dimension of a tile must be static and non-zero}}
  %0 = kiln.reduce sum %t axis 0 : tensor<0x64xf32> -> tensor<64xf32>
  return
}

// -----

// A blocked layout must divide the tile among the threads in whole groups.
// expected-error @+1 {{#kiln.blocked<vec = 8, warps = 4> needs a tile of a multiple of 1024 elements whose last dimension is a multiple of 8}}
func.func @test_not_blocked_fit(%t: tensor<16x16xf32, #kiln.blocked<vec = 8, warps = 4>>) {
  return
}

// -----

// A shape whose element count overflows int64_t is refused, not multiplied out.
// expected-error @+1 {{#kiln.blocked<vec = 1, warps = 1> needs a tile of a multiple of 32 elements whose last dimension is a multiple of 1}}
func.func @test_blocked_huge(%t: tensor<64x333333333333333332xf32, #kiln.blocked<vec = 1, warps = 1>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.blocked: vec must be a power of two in [1, 16], got 3}}
func.func @test_not_blocked_vec(%t: tensor<1024xf32, #kiln.blocked<vec = 3, warps = 4>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.mma<warpsM = 2, warpsN = 2> needs an (M, N) tile with M a multiple of 32 and N a multiple of 16}}
func.func @test_not_mma_fit(%t: tensor<16x64xf32, #kiln.mma<version = 2, warpsM = 2, warpsN = 2>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.mma: version 2 (mma.sync m16n8k16) or 3 (wgmma), got 4}}
func.func @test_not_mma_version(%t: tensor<64x64xf32, #kiln.mma<version = 4, warpsM = 4, warpsN = 1>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.slice: only the rows (dim = 1) or columns (dim = 0) of a #kiln.mma parent are supported}}
func.func @test_not_slice_parent(%t: tensor<64xf32, #kiln.slice<dim = 1, parent = #kiln.blocked<vec = 1, warps = 1>>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.slice of the rows of #kiln.mma<version = 2, warpsM = 4, warpsN = 1> needs an (M) or (M, 1) tile with M a multiple of 64}}
func.func @test_not_slice_shape(%t: tensor<64x2xf32, #kiln.slice<dim = 1, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.slice of the columns of #kiln.mma<version = 2, warpsM = 2, warpsN = 2> needs an (N) or (1, N) tile with N a multiple of 16}}
func.func @test_not_column_slice_shape(%t: tensor<2x64xf32, #kiln.slice<dim = 0, parent = #kiln.mma<version = 2, warpsM = 2, warpsN = 2>>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.dot_operand: only operand 0 (A) of a product whose warps hold whole rows (warpsN = 1) is held in registers; B is read from shared memory}}
func.func @test_not_dot_operand_b(%t: tensor<64x64xf16, #kiln.dot_operand<index = 1, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.shared: swizzled tiles hold 16-bit elements in rows of a power of two of 16-byte chunks}}
func.func @test_not_shared_swizzle(%t: tensor<64x48xf16, #kiln.shared<swizzle = true, transposed = false, warps = 4>>) {
  return
}

// -----

func.func @test_not_convert_without_layouts(%t: tensor<64x64xf32>) {
  // expected-error @+1 {{converts between GPU layouts: both types need a layout encoding}}
  %0 = kiln.convert_layout %t : tensor<64x64xf32> -> tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>
  return
}

// -----

func.func @test_not_convert_shape(%t: tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = kiln.convert_layout %t : tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 4, warpsN = 1>> -> tensor<64x32xf32, #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>
  return
}

// -----

// expected-error @+1 {{#kiln.mma<version = 3>: whole warpgroups on rows (warpsM a multiple of 4, warpsN = 1), got warpsM = 2, warpsN = 2}}
func.func @mma_v3_warps(%x: tensor<64x64xf32, #kiln.mma<version = 3, warpsM = 2, warpsN = 2>>) {
  return
}

// -----

// expected-error @+1 {{#kiln.mma<version = 3, warpsM = 4> needs an (M, N) tile with M = 64 (64 rows per warpgroup) and N a multiple of 8 up to 256}}
func.func @mma_v3_rows(%x: tensor<128x64xf32, #kiln.mma<version = 3, warpsM = 4, warpsN = 1>>) {
  return
}

// -----

func.func @async_dot_read(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>, %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{the result of an async product is read by arith.addf; only a kiln.dot_wait, a yield or the next async product may}}
  %d = kiln.dot %a, %b, %c {async} : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %e = arith.addf %d, %d : tensor<64x64xf32>
  return %e : tensor<64x64xf32>
}

// -----

// A layout whose tile has an element type that did not parse reports that
// error once (the layout's own check has nothing to check).
// expected-error @+1 {{unknown  type `pt` in dialect `kiln`}}
func.func @shared_of_unknown_type(%x: tensor<64x64x!kiln.pt, #kiln.shared<swizzle = true, transposed = false, warps = 4>>) {
  return
}

// -----

// expected-error @+1 {{unknown  type `pt` in dialect `kiln`}}
func.func @dot_operand_of_unknown_type(%x: tensor<64x64x!kiln.pt, #kiln.dot_operand<index = 0, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>>) {
  return
}

// -----

func.func @barriers_not_i64(%bars: !kiln.shared<3x1xi32>) {
  // expected-error @+1 {{expects a ring of barriers (!kiln.shared<N x 1 x i64>), got '!kiln.shared<3x1xi32>'}}
  kiln.mbarrier_init %bars {arrivals = 1 : i32} : !kiln.shared<3x1xi32>
  return
}

// -----

func.func @tma_copy_narrow(%map: !kiln.tensormap, %ring: !kiln.shared<2x64x32xf16>, %bars: !kiln.shared<2x1xi64>, %i: i32) {
  // expected-error @+1 {{copies 2-D tiles of 16-bit or f32 elements whose rows are a multiple of 128 bytes, with at most 256 rows (a multiple of 8), got 'tensor<64x32xf16>'}}
  kiln.async_tma_copy %map[%i, %i], %ring[%i], %bars[%i] : !kiln.shared<2x64x32xf16>, !kiln.shared<2x1xi64>
  return
}

// -----

func.func @tma_copy_narrow_f32(%map: !kiln.tensormap, %ring: !kiln.shared<2x64x16xf32>, %bars: !kiln.shared<2x1xi64>, %i: i32) {
  // expected-error @+1 {{copies 2-D tiles of 16-bit or f32 elements whose rows are a multiple of 128 bytes, with at most 256 rows (a multiple of 8), got 'tensor<64x16xf32>'}}
  kiln.async_tma_copy %map[%i, %i], %ring[%i], %bars[%i] : !kiln.shared<2x64x16xf32>, !kiln.shared<2x1xi64>
  return
}

// -----

func.func @cluster_of_one(%x: f32) -> f32 attributes {kiln.kernel} {
  // expected-error @+1 {{attribute 'size' failed to satisfy constraint}}
  %0 = kiln.cluster_reduce sum %x size 1
  return %0 : f32
}

// -----

func.func @cluster_of_sixteen(%x: f32) -> f32 attributes {kiln.kernel} {
  // expected-error @+1 {{attribute 'size' failed to satisfy constraint}}
  %0 = kiln.cluster_reduce max %x size 16
  return %0 : f32
}

// -----

func.func @cluster_sizes_differ(%x: f32) -> f32 attributes {kiln.kernel} {
  %0 = kiln.cluster_reduce max %x size 4
  // expected-error @+1 {{cluster size 2 differs from another cluster op of the same kernel (4)}}
  %1 = kiln.cluster_reduce sum %0 size 2
  return %1 : f32
}

// -----

func.func @cluster_reduce_of_a_tile(%x: tensor<4xf32>) -> f32 attributes {kiln.kernel} {
  // expected-error @+1 {{must be 32-bit float}}
  %0 = "kiln.cluster_reduce"(%x) {kind = #kiln<reduce_kind sum>, size = 2 : i32} : (tensor<4xf32>) -> f32
  return %0 : f32
}

// -----

func.func @cluster_gather_size_differs(%x: f32) -> tensor<2xf32> attributes {kiln.kernel} {
  %0 = kiln.cluster_reduce max %x size 4
  // expected-error @+1 {{cluster size 2 differs from another cluster op of the same kernel (4)}}
  %1 = kiln.cluster_gather %0 size 2 : f32 -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

func.func @cluster_gather_of_a_matrix(%x: tensor<2x4xf32>) -> tensor<2x2x4xf32> attributes {kiln.kernel} {
  // expected-error @+1 {{gathers scalars and 1-D tiles, not 'tensor<2x4xf32>'}}
  %0 = kiln.cluster_gather %x size 2 : tensor<2x4xf32> -> tensor<2x2x4xf32>
  return %0 : tensor<2x2x4xf32>
}

// -----

func.func @cluster_gather_result_shape(%x: tensor<4xf32>) -> tensor<4x2xf32> attributes {kiln.kernel} {
  // expected-error @+1 {{result type 'tensor<4x2xf32>' != expected 'tensor<2x4xf32>'}}
  %0 = kiln.cluster_gather %x size 2 : tensor<4xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @cluster_gather_of_i32(%x: i32) -> tensor<2xf32> attributes {kiln.kernel} {
  // expected-error @+1 {{must be variadic of 32-bit float}}
  %0 = kiln.cluster_gather %x size 2 : i32 -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
