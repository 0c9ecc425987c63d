//===- matmul.hpp - tiled matrix products with fused epilogues ------------===//
#pragma once

#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/launch.hpp"

namespace kiln::ops {

namespace detail {
/// The (BM, BN) f32 tile of A(M, K) @ B(K, N) owned by this program; A and B
/// are row-major with leading dimensions lda / ldb. Grid: (cdiv(M, BM), cdiv(N, BN)).
/// a[rm, lo:hi] @ b[lo:hi, rn] in f32 (the whole product for lo = 0, hi = K).
/// With BT, `b` holds B transposed, (N, K) row-major (a linear layer's
/// weight): a[rm, lo:hi] @ b[rn, lo:hi]^T. P: see kiln::InputPrecision.
template <class T, int BM, int BN, int BK, InputPrecision P = InputPrecision::ieee, bool BT = false>
Tile<f32, BM, BN> matmul_tile(Ptr<T> a, Ptr<T> b, I32 M, I32 N, I32 lo, I32 hi, I32 lda, I32 ldb,
                              Tile<i32, BM> rm, Tile<i32, BN> rn) {
  auto rk = arange<BK>();                         // (BK)
  auto rows = expand_dims<1>(rm);                 // (BM, 1)
  auto cols = expand_dims<0>(rn);                 // (1, BN)
  return for_range(lo, hi, BK, zeros<f32, BM, BN>(), [&](I32 k0, Tile<f32, BM, BN> acc) {
    auto ka = expand_dims<0>(k0 + rk);            // (1, BK)
    auto at = load(a + rows * lda + ka, (rows < M) & (ka < hi), 0);  // (BM, BK)
    if constexpr (BT) {
      auto nb = expand_dims<1>(rn);               // (BN, 1)
      auto bt = load(b + nb * ldb + ka, (nb < N) & (ka < hi), 0);    // (BN, BK)
      return dot<P>(at, trans(bt), acc);
    } else {
      auto kb = expand_dims<1>(k0 + rk);          // (BK, 1)
      auto bt = load(b + kb * ldb + cols, (kb < hi) & (cols < N), 0);  // (BK, BN)
      return dot<P>(at, bt, acc);
    }
  });
}

/// The (row, column) tile of this program. Programs start in launch order
/// (axis 0 fastest); with G > 1 that order is regrouped so that each run of
/// G * (column tiles) programs covers G row tiles by every column tile,
/// column by column: the programs running at one time share the A rows of
/// G tiles and each B column panel in L2 (Triton's GROUP_M). G = 1 keeps
/// the launch grid as it is.
template <int G> std::pair<I32, I32> grouped_program() {
  if constexpr (G == 1) {
    return {program_id(0), program_id(1)};
  } else {
    I32 rowTiles = num_programs(0), colTiles = num_programs(1);
    I32 pid = program_id(0) + program_id(1) * rowTiles;
    I32 width = colTiles * G;
    I32 first = pid / width * G;
    I32 size = minimum(rowTiles - first, G);
    I32 within = pid % width;
    return {first + within % size, within / size};
  }
}
} // namespace detail

/// C(M, N) = A(M, K) @ B(K, N), f32 accumulation. Grid: (cdiv(M, BM), cdiv(N, BN)).
template <class T, int BM_, int BN_, int BK_, int G = 1> struct GroupedMatmul {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<T> c, I32 M, I32 N, I32 K, I32 lda, I32 ldb,
                  I32 ldc) const {
    detail::wait_for_previous_kernel();
    auto [pm, pn] = detail::grouped_program<G>();
    auto rm = pm * BM + arange<BM>();
    auto rn = pn * BN + arange<BN>();
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, 0, K, lda, ldb, rm, rn);
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    store(c + rows * ldc + cols, cast<T>(acc), (rows < M) & (cols < N));
  }
};
/// The product in launch order.
template <class T, int BM, int BN, int BK> struct Matmul : GroupedMatmul<T, BM, BN, BK, 1> {};

/// C(M, N) = A(M, K) @ B(K, N) of f32 matrices on tensor cores: operands
/// rounded to TF32, f32 accumulation (InputPrecision::tf32; ~1e-4 relative
/// error). With BT, `b` is B transposed, (N, K) row-major with leading
/// dimension ldb, which the tensor cores read as it lands in shared memory;
/// a (K, N) B is transposed on its way there. Tiles in groups of G tile
/// rows. Grid: (cdiv(M, BM), cdiv(N, BN)).
template <int BM_, int BN_, int BK_, bool BT = false, int G = 1> struct MatmulTF32 {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<f32> a, Ptr<f32> b, Ptr<f32> c, I32 M, I32 N, I32 K, I32 lda, I32 ldb,
                  I32 ldc) const {
    detail::wait_for_previous_kernel();
    auto [pm, pn] = detail::grouped_program<G>();
    auto rm = pm * BM + arange<BM>();
    auto rn = pn * BN + arange<BN>();
    auto acc = detail::matmul_tile<f32, BM, BN, BK, InputPrecision::tf32, BT>(a, b, M, N, 0, K, lda, ldb, rm, rn);
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    store(c + rows * ldc + cols, acc, (rows < M) & (cols < N));
  }
};

/// C = gelu_tanh(A @ B + bias), with bias (N) and the epilogue fused; the
/// tiles in groups of G tile rows (see detail::grouped_program).
template <class T, int BM_, int BN_, int BK_, int G = 1> struct GroupedMatmulBiasGelu {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<T> bias, Ptr<T> c, I32 M, I32 N, I32 K, I32 lda,
                  I32 ldb, I32 ldc) const {
    detail::wait_for_previous_kernel();
    auto [pm, pn] = detail::grouped_program<G>();
    auto rm = pm * BM + arange<BM>();
    auto rn = pn * BN + arange<BN>();
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, 0, K, lda, ldb, rm, rn);
    auto bv = cast<f32>(load(bias + rn, rn < N, 0)); // (BN)
    auto out = gelu_tanh<kApproxFor<T>>(acc + expand_dims<0>(bv));
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    store(c + rows * ldc + cols, cast<T>(out), (rows < M) & (cols < N));
  }
};
template <class T, int BM, int BN, int BK> struct MatmulBiasGelu : GroupedMatmulBiasGelu<T, BM, BN, BK, 1> {};

/// `c = a @ b + bias` (the attention QKV projection).
template <class T, int BM_, int BN_, int BK_> struct MatmulBias {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<T> bias, Ptr<T> c, I32 M, I32 N, I32 K, I32 lda,
                  I32 ldb, I32 ldc) const {
    detail::wait_for_previous_kernel();
    auto rm = program_id(0) * BM + arange<BM>();
    auto rn = program_id(1) * BN + arange<BN>();
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, 0, K, lda, ldb, rm, rn);
    auto bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    store(c + rows * ldc + cols, cast<T>(acc + expand_dims<0>(bv)), (rows < M) & (cols < N));
  }
};

/// `c = a @ b + bias + res` (projections that feed the residual stream; `res`
/// may be `c`: within a program every element of the tile is read before any
/// is written, by the same thread or, when the tile is regrouped for the
/// store, before the CTA barrier of that regrouping; programs own disjoint tiles).
template <class T, int BM_, int BN_, int BK_> struct MatmulBiasResidual {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<T> bias, Ptr<T> res, Ptr<T> c, I32 M, I32 N, I32 K,
                  I32 lda, I32 ldb, I32 ldc) const {
    detail::wait_for_previous_kernel();
    auto rm = program_id(0) * BM + arange<BM>();
    auto rn = program_id(1) * BN + arange<BN>();
    auto acc = detail::matmul_tile<T, BM, BN, BK>(a, b, M, N, 0, K, lda, ldb, rm, rn);
    auto bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto rows = expand_dims<1>(rm); // (BM, 1)
    auto cols = expand_dims<0>(rn); // (1, BN)
    auto mask = (rows < M) & (cols < N);
    auto r = cast<f32>(load(res + rows * ldc + cols, mask, 0));
    store(c + rows * ldc + cols, cast<T>(acc + expand_dims<0>(bv) + r), mask);
  }
};

} // namespace kiln::ops
