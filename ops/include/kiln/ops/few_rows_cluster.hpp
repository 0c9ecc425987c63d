//===- few_rows_cluster.hpp - few-row products split along K in a cluster -===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/decoder.hpp"

namespace kiln::ops {

/// `c = E(x @ wt^T)` for 2 to BR rows, as FewRowsLinear computes it, with
/// K split over the S programs of a thread-block cluster (2 to 8) and the
/// partial tiles added in the cluster's distributed shared memory: no
/// partial tiles in global memory, no counters, no last-program round trip.
///
/// Program p is rank s = p % S of column tile j = p / S. It loads its
/// (BN, C * KC) panel of the weight at K offset s * C * KC (all C chunks
/// before it waits on the previous kernel, as FewRowsLinear), multiplies
/// it by the same columns of x on the tensor cores, then the cluster's S
/// (BN, BR) tiles meet in one exchange (cluster_gather) and each program
/// sums them in rank order (every program gets the same bits) and finishes
/// its share of the tile's columns (a contiguous block of about BN / S):
/// + bias, then gelu; or + bias + res, where `res` may be `c`. A product
/// whose K is longer than one cluster's S * C * KC is still correct: each
/// program takes the ranges s * C * KC + t * S * C * KC (t >= 1) too,
/// loading them after the wait. So a grid spreads a short product over
/// S times the programs of FewRowsLinear's unsplit grid with nothing left
/// in memory between launches. The grid also brings the `pf_count`
/// elements from `pf` into L2 (none when 0), each program its share.
/// Grid: (cdiv(N, BN) * S).
template <class T, int BR_, int BN_, int KC_, int C_, int S_, Epilogue E> struct FewRowsClusterLinear {
  static_assert(S_ >= 2 && S_ <= 8, "FewRowsClusterLinear: a cluster holds 2 to 8 programs");
  using Plain = FewRowsLinear<T, BR_, BN_, KC_, C_, E>;
  static constexpr int BR = BR_, BN = BN_, KC = KC_, C = C_, S = S_;
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return Plain::feasible(warps, stages, schedule);
  }
  /// The inputs one cluster covers before its programs' loads after the
  /// wait: products of up to this many K run at the panel's speed.
  static constexpr int span() { return S * C * KC; }
  /// The grid of a product of N output columns.
  static Grid grid(int64_t N) { return Grid(uint32_t(ceil_div(N, int64_t(BN)) * S)); }

  void operator()(Ptr<T> x, Ptr<T> wt, Ptr<T> bias, Ptr<T> res, Ptr<T> c, I32 M, I32 N, I32 K, Ptr<T> pf,
                  I32 pf_count) const {
    launch_dependents();
    auto p = program_id(0);
    auto s = p % S;
    auto lanes = arange<BN>();
    auto rn = p / S * BN + lanes; // output columns: weight rows
    std::optional<Tile<f32, BN>> bv;
    if constexpr (E != Epilogue::None)
      bv = cast<f32>(load(bias + rn, rn < N, 0));
    auto acc = detail::few_rows_product<T, BR, BN, KC, C, false>(x, x, x, wt, M, N, K, F32(0.0f), rn,
                                                                 s * (C * KC), pf, pf_count, [] {});
    // K past the cluster's first span: this program's later ranges.
    auto ck = expand_dims<0>(arange<KC>());  // (1, KC)
    auto xr = expand_dims<1>(arange<BR>());  // (BR, 1)
    acc = for_range(s * (C * KC) + span(), K, span(), acc, [&](I32 lo, Tile<f32, BN, BR> a) {
      for (int q = 0; q < C; ++q) {
        auto kk = lo + q * KC + ck;
        auto w = load(wt + expand_dims<1>(rn) * K + kk, expand_dims<1>(rn < N) & (kk < K), 0);
        auto v = load(x + xr * K + kk, (xr < M) & (kk < K), 0);
        a = dot(w, trans(v), a);
      }
      return a;
    });
    auto [parts] = cluster_gather<S>(reshape<BN * BR>(acc));
    auto v = reshape<BN, BR>(sum<0>(parts));
    auto cols = expand_dims<1>(rn);           // (BN, 1)
    auto rows = expand_dims<0>(arange<BR>()); // (1, BR)
    auto mine = expand_dims<1>(lanes * S / BN == s);
    auto inside = (cols < N) & (rows < M) & mine;
    if constexpr (E != Epilogue::None)
      v = v + expand_dims<1>(*bv);
    if constexpr (E == Epilogue::BiasGelu)
      v = gelu_tanh<kApproxFor<T>>(v);
    if constexpr (E == Epilogue::BiasResidual)
      v = v + cast<f32>(load(res + rows * N + cols, inside, 0));
    store(c + rows * N + cols, cast<T>(v), inside);
  }
};

} // namespace kiln::ops
