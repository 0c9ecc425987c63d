//===- policy.hpp - which kernel a block runs, and how it is tuned ---------===//
//
// The blocks' kernel-choice policy, apart from the blocks: which kernel
// serves how many rows (the decode ladder of 1, 2, 4 and 8 rows, the
// few-row and many-row products), the untuned configurations as ranked on
// the GPUs of bench/README.md (columns a program, panels, warps), and the
// tuning spaces the autotuner searches. Every choice here is a value or a
// small declared set of tile types; blocks.hpp uses it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/autotuner/space.hpp"
#include "kiln/nn/tensor.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/epilogue.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/matmul.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kiln::nn {

/// What a linear layer adds after its product (the kernels' enum).
using Epilogue = ops::Epilogue;

/// Decode-step kernels run up to this many rows; more rows take the
/// prefill kernels.
inline constexpr int kDecodeRows = 8;
/// The most rows a few-row product (ops::FewRowsLinear) serves.
inline constexpr int kFewRows = 16;
/// The most rows a many-row product (ops::FewRowsLinear on 32 or 64 rows:
/// decode steps of 17 to 64 sequences) serves.
inline constexpr int kManyRows = 64;
/// Blocks run the many-row products up to this many rows unless told
/// otherwise: on an H100, GPT-2 124M's decode step at batch 32 took 0.82 ms
/// on them against 0.92 on the prefill products, but at batch 64 1.23
/// against 1.20 (bench/README.md).
inline constexpr int kManyRowsDefault = 32;

namespace detail {

template <class D, Epilogue E, int BM, int BN, int BK> struct MatmulKernel;
template <class D, int BM, int BN, int BK> struct MatmulKernel<D, Epilogue::None, BM, BN, BK> {
  using type = ops::Matmul<D, BM, BN, BK>;
};
template <class D, int BM, int BN, int BK> struct MatmulKernel<D, Epilogue::Bias, BM, BN, BK> {
  using type = ops::MatmulBias<D, BM, BN, BK>;
};
template <class D, int BM, int BN, int BK> struct MatmulKernel<D, Epilogue::BiasGelu, BM, BN, BK> {
  using type = ops::MatmulBiasGelu<D, BM, BN, BK>;
};
template <class D, int BM, int BN, int BK>
struct MatmulKernel<D, Epilogue::BiasResidual, BM, BN, BK> {
  using type = ops::MatmulBiasResidual<D, BM, BN, BK>;
};
template <class D, Epilogue E, int BM, int BN, int BK>
using Matmul = typename MatmulKernel<D, E, BM, BN, BK>::type;

/// A decode step's kernels are tuned as graphs of this many launches of
/// the candidate (TuneTiming::chain), each a programmatic dependent of the
/// one before, as they run in a step.
inline constexpr int kDecodeChain = 16;

/// The row counts of the decode-step kernels, a ladder: a step of B rows
/// runs the kernel of the smallest count that is at least B, so a batch of
/// 2 does not stream the weights through an 8-row kernel's registers.
inline constexpr int kDecodeSlots = 4; // 1, 2, 4 and kDecodeRows rows
static_assert(kDecodeRows == 8, "the ladder is 1, 2, 4, 8");
/// The ladder's slot of the kernel that 1 to kDecodeRows rows run.
constexpr int decodeSlot(int64_t rows) { return rows <= 1 ? 0 : rows <= 2 ? 1 : rows <= 4 ? 2 : 3; }
/// `rows` rounded down to a count of the ladder (0: no decode kernels).
constexpr int decodeRowsOf(int64_t rows) {
  return rows >= 8 ? 8 : rows >= 4 ? 4 : rows >= 2 ? 2 : rows >= 1 ? 1 : 0;
}
/// The smallest count of the ladder that holds `rows` sequences (the
/// largest, kDecodeRows, past it).
constexpr int decodeRowsHolding(int64_t rows) { return 1 << decodeSlot(rows); }
static_assert(decodeRowsHolding(1) == 1 && decodeRowsHolding(3) == 4 && decodeRowsHolding(5) == 8 &&
              decodeRowsHolding(16) == 8);
/// Calls f(R) for each count R of the ladder up to `rows` (a count of the
/// ladder).
template <class F> void forDecodeLadder(int rows, F &&f) {
  for (int R = 1; R <= kDecodeRows; R *= 2)
    if (R <= rows)
      f(R);
}
/// The row count of ladder slot `slot`.
constexpr int decodeRowsAt(int slot) { return 1 << std::min(slot, kDecodeSlots - 1); }
/// The name suffix of a block's decode-step kernel of R rows.
inline std::string decodeSuffix(int R) { return "_decode" + std::to_string(R); }
/// Output columns per program of the heuristic (untuned) decode-step
/// kernels of R rows: `one` for a row (as ranked on an H200), 8 for two,
/// 4 for more (the accumulators of R rows share the registers). With the
/// layernorm folded in (LN), two more accumulators (the weight sums) leave
/// room for 4 at two rows: 8 took 246 registers a thread on sm_90a. Wide
/// inputs take fewer where this does not fit (ops::decode_columns).
template <class D> int decodeColumnsFor(int R, int K, bool LN, int one) {
  return ops::decode_columns<D>(R, K, 256, LN, R == 1 ? one : R == 2 && !LN ? 8 : 4);
}

/// The decode-step kernels Op<D, BN> configured by `configure(kernel)` (rows,
/// K, ...: values), over the column tiles BN of 4, 8 and 16 (4 and 8 for
/// f32, whose decode kernels serve exactness, not speed) times 1 to 8 warps,
/// pruned by the kernel's `feasible` (registers, 16-byte loads). Three tile
/// types are compiled into the host program; the rest is data.
template <template <class, int, int> class Op, class D, class Configure>
auto decodeSpace(Configure configure) {
  tuning::Candidates<Op<D, 4, 256>, Op<D, 8, 256>, Op<D, 16, 256>> space;
  auto add = [&]<int BN>() {
    Op<D, BN, 256> kernel{};
    configure(kernel);
    space.add_feasible(kernel, {1, 2, 4, 8});
  };
  add.template operator()<4>();
  add.template operator()<8>();
  if constexpr (!std::is_same_v<D, f32>)
    add.template operator()<16>();
  return space;
}


/// A row-wise kernel Op<D, BLOCK> (a program per row, BLOCK columns at a
/// time) over BLOCK in {256, 512, 1024} and `warps`.
template <template <class, int> class Op, class D, class Warps>
auto rowSpace(Warps warps) {
  return tuning::product(boost::hana::tuple_t<Op<D, 256>, Op<D, 512>, Op<D, 1024>>, warps,
                         tuning::kNoStages, tuning::kPlainOnly);
}

/// "role RxKxN", the key of a tuned product.
inline std::string productKey(const std::string &role, int64_t rows, int64_t k, int64_t n) {
  return role + " " + std::to_string(rows) + "x" + std::to_string(k) + "x" + std::to_string(n);
}

inline std::string shapeName(const char *block, int64_t in, int64_t out) {
  return std::string(block) + "(" + std::to_string(in) + " -> " + std::to_string(out) + ")";
}

/// Whether products of 2 to `few_rows` rows of type D run the few-row
/// kernels (ops::FewRowsLinear and its fused variants): 16-bit types (the
/// tensor cores' operands), given the weight as [N, K].
template <class D> bool fewRowsFor(int few_rows, bool haveWeightT) {
  return !std::is_same_v<D, f32> && few_rows >= 2 && haveWeightT;
}

/// Blocks take few_rows from 0 (no few-row kernels) to kFewRows, and
/// many_rows from 0 to kManyRows (`what` names the option).
inline void checkFewRows(int few_rows, int most, const std::string &block, const char *what = "few_rows") {
  if (few_rows < 0 || few_rows > most)
    throw Error(block + ": " + what + " must be 0 to " + std::to_string(most) + " (got " +
                std::to_string(few_rows) + ")");
}

/// Calls f.template operator()<BN, KC, C>(warps) with the panel of a
/// few-row product of N output columns and K inputs, as kiln_bench's
/// BM_few_rows ranked them on an H200 (28 panels and warp counts at 8 rows,
/// each timed as a CUDA graph of 32 launches on distinct weights; bench/
/// README.md): wide outputs take 32 weight rows a program and up to 768 of
/// K (4 warps), which leaves at least 64 programs for one K range (768x3072
/// 4.1 us); narrow ones too where K is at most 768 (768x768: 3.0 us, against
/// 3.5 split in three), and 16 rows and 512 of K (2 warps), split along K,
/// where it is longer (3072x768: 5.4 us, against 5.8 for 256 of K).
template <class F> void withFewPanel(int64_t N, int64_t K, F &&f) {
  if (ceil_div(N, int64_t(32)) >= 64 || K <= 768)
    f.template operator()<32, 256, 3>(4);
  else
    f.template operator()<16, 256, 2>(2);
}

/// The panel (as withFewPanel) of a few-row product with the layernorm
/// fused (ops::FewRowsNormLinear, ops::FewRowsQkv). With the row statistics
/// and the normalised rows live, the 32x768 panel on 4 warps spills (176
/// bytes a thread on sm_90a with bias and gelu, 48 without; kiln-ptx-report)
/// and 32x384 does not: outputs of 64 to 1023 tiles of 32 (QKV, MLP up)
/// take 32x384, split along K, which also gives a wave of 132
/// multiprocessors twice the programs; the LM head's 1571 tiles are
/// programs enough, and its K is not split (the f32 partial tiles of 50257
/// outputs would cost a sixth of the weight's traffic); narrow outputs as
/// unfused.
template <class F> void withFewNormPanel(int64_t N, F &&f) {
  int64_t tiles = ceil_div(N, int64_t(32));
  if (tiles >= 1024)
    f.template operator()<32, 256, 3>(4);
  else if (tiles >= 64)
    f.template operator()<32, 128, 3>(4);
  else
    f.template operator()<16, 128, 2>(2);
}

/// Calls f.template operator()<BR, BN, KC, C>(warps) with the rows and panel
/// of the many-row products (ops::FewRowsLinear for kFewRows + 1 to
/// kManyRows rows): 32 rows, and 64. The activations of a program's K
/// range are the mma's BR-wide side and stay in its registers beside the
/// weights, so a program takes 256 of K (split along K, the partial tiles
/// added by the last program of a column tile): 32 weight rows on 4 warps
/// for 32 rows, 16 on 8 warps for 64. As kiln_bench's BM_many_rows ranked
/// 33 panels and warp counts of GPT-2 124M's four products on an H100
/// (bench/README.md): 5.7-7.6 us a launch at 32 rows and 6.1-12.9 at 64,
/// where the prefill products' tiles took 9.6-23.5 (the 3072 -> 768
/// product on 24 programs).
template <class F> void withManyPanels(F &&f) {
  f.template operator()<32, 32, 256, 1>(4);
  f.template operator()<kManyRows, 16, 256, 1>(8);
}

/// The grid of a few-row product of N outputs and K inputs with a (BN, C x
/// KC) panel, and its split-K scratch: f32 partial tiles [splits, N,
/// kFewRows] and a counter per column tile (zero between launches); a
/// product of one K range needs neither.
struct FewRowsPlan {
  uint32_t tiles = 0, splits = 0;
  Tensor<f32> partial;
  Tensor<i32> counter;
  FewRowsPlan() = default;
  FewRowsPlan(const Target &t, int64_t N, int64_t K, int BN, int span, int rows)
      : tiles(uint32_t(ceil_div(N, int64_t(BN)))), splits(uint32_t(ceil_div(K, int64_t(span)))),
        partial(t, {splits > 1 ? int64_t(splits) * N * rows : 1}), counter(t, {splits > 1 ? int64_t(tiles) : 1}) {}
  Grid grid() const { return Grid(tiles, splits); }
};

/// The most bytes a decode-step kernel brings into L2 for a later one:
/// about half the L2 of an H100 or H200 (the LM head's 77 MB are read
/// from their start).
inline constexpr int64_t kMaxPrefetchBytes = int64_t(24) << 20;

/// The weights of a later kernel that a decode-step kernel brings into L2
/// while it runs (ops::DecodeLinear's pf, pf_count): none by default.
template <class D> struct Prefetch {
  Tensor<D> next;
  /// The kernel's pointer argument: next's data, or `none` when there is nothing.
  typename D::host *ptr(typename D::host *none) const { return next.empty() ? none : next.data(); }
  int count() const {
    int64_t most = kMaxPrefetchBytes / int64_t(sizeof(typename D::host));
    return next.empty() ? 0 : int(std::min(next.numel(), most));
  }
};

} // namespace detail

} // namespace kiln::nn
