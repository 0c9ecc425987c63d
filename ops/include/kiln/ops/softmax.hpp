//===- softmax.hpp - row softmax ------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/launch.hpp"

namespace kiln::ops {

namespace detail {
/// log2(e): the kernels below work in base 2, softmax(x) = 2^(t - max t) /
/// sum 2^(t - max t) with t = x log2(e), so that each exponential is one
/// `ex2.approx` on the GPU (and the scale folds into an fma) where exp()
/// takes libdevice's accurate expf, about ten instructions (the online
/// sweep takes three exponentials an element). On an H100 this made the
/// 50257-wide rows 2-10% faster and the cluster softmax 30% (bench/README.md).
inline constexpr float kLog2e = 1.4426950408889634f;

/// The looped softmax of row `row`: a sweep keeping a running max and
/// rescaled sum per lane (online softmax), then a sweep writing, both from
/// the 16-byte boundary at or before the row's column 0, each loading its
/// next block of columns before it works on this one.
template <class T, int BLOCK>
void softmax_sweeps(Ptr<T> x, Ptr<T> y, I32 row, I32 n_cols, I32 x_stride, I32 y_stride) {
  auto x_row = x + row * x_stride;
  auto y_row = y + row * y_stride;
  auto first = aligned_first_column<T>(row * x_stride);
  auto cols = arange<BLOCK>(); // (BLOCK)
  auto chunk = [&](I32 start) {
    auto c = start + cols;
    return load(x_row + c, (c >= 0) & (c < n_cols), -inf);
  };
  // Online softmax per lane, in base 2: a running max m of t = x log2(e)
  // and the sum s of 2^(t - m). A lane whose max is still -inf (all its
  // values -inf, or no column yet) holds s = 0: 2^(-inf - -inf) would be
  // NaN. Everything else follows PyTorch: a row of -inf, or with +inf or
  // NaN, gives NaN.
  auto [m, s, unused] = for_range(
      first, n_cols, BLOCK, std::tuple(full<f32, BLOCK>(-inf), zeros<f32, BLOCK>(), chunk(first)),
      [&](I32 start, Tile<f32, BLOCK> m, Tile<f32, BLOCK> s, Tile<T, BLOCK> here) {
        auto next = chunk(start + BLOCK);
        auto t = cast<f32>(here) * kLog2e;
        auto m_new = maximum(m, t);
        auto s_new = s * exp2(m - m_new) + exp2(t - m_new);
        return std::tuple(m_new, where(m_new == -inf, 0.0, s_new), next);
      });
  (void)unused;
  auto row_max = max(m);
  auto row_sum = sum(where(m == -inf, 0.0, s * exp2(m - row_max)));
  auto inv = 1.0f / row_sum;
  for_range(first, n_cols, BLOCK, chunk(first), [&](I32 start, Tile<T, BLOCK> here) {
    auto next = chunk(start + BLOCK);
    auto c = start + cols;
    store(y_row + c, cast<T>(exp2(cast<f32>(here) * kLog2e - row_max) * inv), (c >= 0) & (c < n_cols));
    return next;
  });
}
} // namespace detail

/// y[r, :] = softmax(x[r, :]) over n_cols, computed in f32. One program per
/// row (grid: rows). With ONE_PASS the row must fit one block (n_cols <=
/// BLOCK) and is read once; otherwise any n_cols works: a first sweep keeps a
/// running max and rescaled sum per lane (online softmax), a second writes.
/// The sweeps start at the 16-byte boundary at or before the row's first
/// column, so that rows of any stride (50257 halves, say) are read and
/// written with vector accesses, and load the next block of columns before
/// working on this one.
/// Non-finite inputs give what torch.softmax gives: NaN for a row that is all
/// -inf or holds +inf or NaN; -inf entries of other rows give 0.
template <class T, int BLOCK, bool ONE_PASS = false> struct Softmax {
  void operator()(Ptr<T> x, Ptr<T> y, I32 n_cols, I32 x_stride, I32 y_stride) const {
    auto row = program_id(0);
    if constexpr (ONE_PASS) {
      auto cols = arange<BLOCK>(); // (BLOCK)
      auto mask = cols < n_cols;
      auto t = cast<f32>(load(x + row * x_stride + cols, mask, -inf)) * detail::kLog2e;
      auto e = exp2(t - max(t));
      store(y + row * y_stride + cols, cast<T>(e / sum(e)), mask);
    } else {
      detail::softmax_sweeps<T, BLOCK>(x, y, row, n_cols, x_stride, y_stride);
    }
  }
};

/// Softmax of short rows (n_cols <= BLOCK), ROWS of them at a time: program
/// p of a grid of G takes rows [p * ROWS, (p + 1) * ROWS), then the ROWS
/// rows G * ROWS further on, and so on, loading its next rows before it
/// reduces and writes the current ones. Any grid is correct; as many
/// programs as fit on the GPU at once (`cuda::multiprocessor_count()` times
/// the programs a multiprocessor holds) keeps every memory channel busy
/// without a tail of half-empty waves. Same results as Softmax.
template <class T, int ROWS, int BLOCK> struct SoftmaxRows {
  void operator()(Ptr<T> x, Ptr<T> y, I32 n_rows, I32 n_cols, I32 x_stride, I32 y_stride) const {
    auto r = expand_dims<1>(arange<ROWS>());  // (ROWS, 1)
    auto c = expand_dims<0>(arange<BLOCK>()); // (1, BLOCK)
    auto in_row = c < n_cols;
    auto step = num_programs(0) * ROWS;
    auto block = [&](I32 first) {
      auto rows = first + r;
      return load(x + rows * x_stride + c, (rows < n_rows) & in_row, -inf);
    };
    auto first = program_id(0) * ROWS;
    for_range(first, n_rows, step, block(first), [&](I32 at, Tile<T, ROWS, BLOCK> here) {
      auto next = block(at + step);
      auto t = cast<f32>(here) * detail::kLog2e;
      auto e = exp2(t - expand_dims<1>(max<1>(t)));
      auto rows = at + r;
      store(y + rows * y_stride + c, cast<T>(e / expand_dims<1>(sum<1>(e))), (rows < n_rows) & in_row);
      return next;
    });
  }
};

/// Softmax of wide rows (any n_cols; a vocabulary's logits, say), with
/// Softmax's two sweeps of a row, a row at a time: program p of a grid of G
/// takes rows p, p + G, p + 2G, ... Any grid is correct. Softmax's grid of a
/// program per row keeps as many rows in flight as the GPU holds programs
/// (a 4096 x 50257 f16 input at 8 programs of 8 warps an SM: 1056 rows,
/// 106 MB), more than L2 holds, so the second sweep reads memory again; a
/// grid of `cuda::multiprocessor_count()` times one or two programs keeps
/// the rows in flight in L2 (132 rows of 100 KB: 13 MB), and the second
/// sweep reads them there. Same results as Softmax.
template <class T, int BLOCK> struct SoftmaxWide {
  void operator()(Ptr<T> x, Ptr<T> y, I32 n_rows, I32 n_cols, I32 x_stride, I32 y_stride) const {
    for_range(program_id(0), n_rows, num_programs(0),
              [&](I32 row) { detail::softmax_sweeps<T, BLOCK>(x, y, row, n_cols, x_stride, y_stride); });
  }
};

/// Softmax of wide rows split over a thread-block cluster: one read of the
/// row and one write, with nothing held beyond a program's registers.
/// Program p is part `p % CLUSTER` of row `p / CLUSTER` (grid: rows x
/// CLUSTER). From `first` (at most 16 bytes before column 0, so that every
/// part starts on a 16-byte boundary) the row is cut into CLUSTER spans of
/// equal length, a multiple of 16 bytes, each held by one program in a
/// BLOCK-wide tile. Each part's maximum m and its sum of e^(v - m) meet in
/// one exchange over the cluster (`cluster_gather`: on the GPU through
/// distributed shared memory, sm_90 and newer, between two cluster
/// barriers); every program rescales the sums to the row's maximum M and
/// its own values by e^(m - M). A row fits when its span is at most BLOCK,
/// which `softmax_cluster_fits` checks (a 50257-wide f16 row: clusters of
/// 7 x 8192 or 4 x 16384). Same results as Softmax (NaN for rows
/// torch.softmax gives NaN). Measured slower than Softmax's two sweeps on an
/// H100 (bench/README.md).
template <class T, int BLOCK, int CLUSTER> struct SoftmaxCluster {
  static_assert(CLUSTER >= 2 && CLUSTER <= 8, "SoftmaxCluster: a cluster holds 2 to 8 programs");
  static constexpr int kVec = 16 / int(sizeof(typename T::host));
  void operator()(Ptr<T> x, Ptr<T> y, I32 n_cols, I32 x_stride, I32 y_stride) const {
    auto p = program_id(0);
    auto row = p / CLUSTER;
    auto first = detail::aligned_first_column<T>(row * x_stride);
    auto span = ((n_cols - first + (CLUSTER - 1)) / CLUSTER + (kVec - 1)) / kVec * kVec;
    auto lanes = arange<BLOCK>();
    auto c = first + p % CLUSTER * span + lanes;
    auto mask = (lanes < span) & (c >= 0) & (c < n_cols);
    auto t = cast<f32>(load(x + row * x_stride + c, mask, -inf)) * detail::kLog2e;
    auto m = max(t);
    // A part with no finite value (past the row's end, or -inf) adds 0.
    auto e = exp2(t - where(m == -inf, F32(0.0f), m));
    auto [ms, sums] = cluster_gather<CLUSTER>(m, sum(e));
    auto top = max(ms);
    auto total = sum(sums * exp2(ms - top));
    store(y + row * y_stride + c, cast<T>(e * (exp2(m - top) / total)), mask);
  }
};

/// Whether SoftmaxCluster<T, BLOCK, CLUSTER> covers rows of `n_cols`
/// wherever they start.
template <class T, int BLOCK, int CLUSTER> constexpr bool softmax_cluster_fits(int64_t n_cols) {
  constexpr int64_t vec = 16 / int64_t(sizeof(typename T::host));
  int64_t span = ((n_cols + vec - 1 + CLUSTER - 1) / CLUSTER + vec - 1) / vec * vec;
  return n_cols >= 0 && span <= BLOCK;
}

} // namespace kiln::ops
