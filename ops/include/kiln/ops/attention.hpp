//===- attention.hpp - causal self-attention over a KV cache ---------------===//
//
// Layouts (C = H * D): `qkv` rows are [q | k | v] of 3C columns, head h at
// columns h*D .. h*D+D of each part; the caches `kc`, `vc` are [B, Tmax, C];
// `out` rows are C columns. Keys of sequence b at positions 0 .. p are at
// rows b*Tmax .. b*Tmax+p of the caches.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/launch.hpp"
#include "kiln/ops/softmax.hpp"

#include <tuple>
#include <utility>

namespace kiln::ops {

/// A large negative score for masked keys: finite, so that rows with no key
/// yet do not produce inf - inf.
inline constexpr float kMaskedScore = -1e30f;

/// Prefill of a batch of prompts whose rows are packed one after another:
/// sequence b owns rows start[b] .. start[b] + len[b] - 1 of `qkv` and `out`,
/// at positions 0 .. len[b] - 1, and its keys are already in its cache.
/// Each query attends, flash style (online softmax over BN-key blocks, never
/// materialising the scores), with `scale` > 0, to the keys at or before its
/// position (CAUSAL) or to all len[b] keys of its sequence. Key blocks that
/// need no mask take a loop of their own: causally those wholly below the
/// diagonal (keys < qb * BM, before every query of the block), so only the
/// BM / BN blocks on the diagonal are masked; otherwise every whole block,
/// and the last, partial one is masked. Scores go through exp2 with the scale
/// and log2(e) folded into one multiply-add per score (FlashAttention's
/// form). Grid: (cdiv(max len, BM), H, B).
template <class T, int BM_, int BN_, int D_, bool CAUSAL = true> struct AttentionPrefill {
  static constexpr int BM = BM_, BN = BN_, D = D_;
  static_assert(!CAUSAL || BM_ % BN_ == 0, "the diagonal starts on a key block");
  /// Plain schedule; every warp owns at least 16 rows of the scores.
  static constexpr bool feasible(int warps, int, int schedule) {
    return schedule == 0 && BM_ >= warps * 16;
  }
  void operator()(Ptr<T> qkv, Ptr<T> kc, Ptr<T> vc, Ptr<T> out, Ptr<i32> start, Ptr<i32> length,
                  I32 C, I32 Tmax, F32 scale) const {
    auto qb = program_id(0), h = program_id(1), b = program_id(2);
    auto first = load(start + b), len = load(length + b);
    auto rm = qb * BM + arange<BM>(); // positions of the queries
    auto rd = arange<D>();
    auto rows = expand_dims<1>(rm);                                              // (BM, 1)
    auto dcol = expand_dims<0>(rd);                                              // (1, D)
    auto q = load(qkv + (first + rows) * (3 * C) + h * D + dcol, rows < len, 0); // (BM, D)
    auto kbase = kc + b * Tmax * C + h * D;
    auto vbase = vc + b * Tmax * C + h * D;
    auto c = scale * F32(1.44269504088896340736f); // scale * log2(e)
    using State = std::tuple<Tile<f32, BM>, Tile<f32, BM>, Tile<f32, BM, D>>;
    // One key block: m is the running maximum of the raw scores, l the sum
    // of 2^((s - m) c), acc the unnormalised output.
    auto block = [&](bool diagonal) {
      return [&, diagonal](I32 n0, Tile<f32, BM> m, Tile<f32, BM> l, Tile<f32, BM, D> acc) -> State {
        auto rn = n0 + arange<BN>();
        auto kcol = expand_dims<0>(rn); // (1, BN)
        auto krow = expand_dims<1>(rn); // (BN, 1)
        Tile<T, BN, D> k = diagonal ? load(kbase + krow * C + dcol, krow < len, 0) : load(kbase + krow * C + dcol);
        auto s = dot(q, trans(k)); // (BM, BN)
        if (diagonal && CAUSAL)
          s = where((kcol <= rows) & (kcol < len), s, kMaskedScore);
        else if (diagonal)
          s = where(kcol < len, s, kMaskedScore);
        auto m_new = maximum(m, max<1>(s));
        auto p = exp2(s * c - expand_dims<1>(m_new * c));
        auto alpha = exp2((m - m_new) * c);
        Tile<T, BN, D> v = diagonal ? load(vbase + krow * C + dcol, krow < len, 0) : load(vbase + krow * C + dcol);
        auto acc_new = acc * expand_dims<1>(alpha) + dot(cast<T>(p), v);
        return {m_new, l * alpha + sum<1>(p), acc_new};
      };
    };
    // Causal: keys past the block's last query are never needed. No keys at
    // all for blocks past the prompt.
    auto inPrompt = qb * BM < len;
    auto [below, hi] = [&] {
      if constexpr (CAUSAL)
        return std::pair{where(inPrompt, qb * BM, I32(0)), where(inPrompt, minimum(len, (qb + 1) * BM), I32(0))};
      else
        return std::pair{where(inPrompt, len / BN * BN, I32(0)), where(inPrompt, len, I32(0))};
    }();
    State init{full<f32, BM>(kMaskedScore), zeros<f32, BM>(), zeros<f32, BM, D>()};
    auto [m0, l0, acc0] = for_range(0, below, BN, init, block(false));
    auto [m, l, acc] = for_range(below, hi, BN, State{m0, l0, acc0}, block(true));
    (void)m;
    store(out + (first + rows) * C + h * D + dcol, cast<T>(acc / expand_dims<1>(l)), rows < len);
  }
};

namespace detail {

/// What one program of a split decode attention computes (see
/// AttentionDecode): program s of the S of head h of sequence b attends to
/// its span of the len = pos[b] + 1 keys, then calls then(m, l, acc, used,
/// len) with its running max (of scores in base 2: scale * log2(e) * q.k),
/// sum and unnormalised output (the masked
/// score, 0 and 0 where its span is empty) and the number of programs that
/// have keys. With `guarded`, programs past the used ones skip their loads
/// and `then` (kernels whose programs never meet); without, every program
/// calls `then` (those that exchange values in a cluster).
template <class T, int BN, int D, class Then>
void decode_attention_span(Ptr<T> qkv, Ptr<T> kc, Ptr<T> vc, Ptr<i32> pos, I32 C, I32 Tmax, F32 scale, I32 b,
                           I32 h, I32 s, I32 S, bool guarded, Then then) {
  // A decode-step kernel, launched while the QKV projection ends: the
  // positions and the first block's earlier keys (all but the step's
  // own, which that projection writes) are loaded before the wait, so
  // their memory round trips overlap the previous kernel.
  launch_dependents();
  auto len = load(pos + b) + 1;
  auto blocks = (len + (BN - 1)) / BN;
  auto span = (blocks + S - 1) / S * BN;
  auto used = (len + span - 1) / span; // programs with keys: at most S
  auto lo = s * span;
  auto hi = minimum(len, lo + span);
  auto rd = arange<D>();
  auto kbase = kc + b * Tmax * C + h * D;
  auto vbase = vc + b * Tmax * C + h * D;
  auto offsets = [&](Tile<i32, BN> rn) { return expand_dims<1>(rn) * C + expand_dims<0>(rd); };
  auto keys = [&](I32 n0) {
    auto rn = n0 + arange<BN>();
    auto valid = expand_dims<1>(rn < hi);
    return std::tuple{load(kbase + offsets(rn), valid, 0), load(vbase + offsets(rn), valid, 0)};
  };
  auto rn0 = lo + arange<BN>();
  auto earlier = expand_dims<1>((rn0 < minimum(hi, len - 1)) & broadcast_to<BN>(s < used));
  auto k_early = load(kbase + offsets(rn0), earlier, 0);
  grid_dependency_wait();
  auto attend = [&] {
    // The step's own key, where it falls in the first block; the values
    // are first needed after the scores.
    auto own = expand_dims<1>(rn0 == len - 1);
    auto k0 = where(own, load(kbase + offsets(rn0), own, 0), k_early);
    auto v0 = load(vbase + offsets(rn0), expand_dims<1>(rn0 < hi), 0);
    // The query, loaded by each thread for the columns of k it holds: no
    // exchange through shared memory.
    auto q = load(qkv + b * (3 * C) + h * D + broadcast_to<BN, D>(expand_dims<0>(rd)));
    using KV = Tile<T, BN, D>;
    auto c = scale * detail::kLog2e; // scores in base 2: one ex2 each
    auto init = std::tuple{F32(kMaskedScore), F32(0.0f), zeros<f32, D>(), k0, v0};
    auto [m, l, acc, kl, vl] =
        for_range(lo, hi, BN, init, [&](I32 n0, F32 m, F32 l, Tile<f32, D> acc, KV kt, KV vt) {
          auto [kn, vn] = keys(n0 + BN); // the next block, in flight during this one
          auto rn = n0 + arange<BN>();
          auto sc = where(rn < hi, sum<1>(cast<f32>(kt) * cast<f32>(q)) * c, kMaskedScore);
          auto m_new = maximum(m, max(sc));
          auto p = where(rn < hi, exp2(sc - m_new), 0.0f);
          auto alpha = exp2(m - m_new);
          return std::tuple{m_new, l * alpha + sum(p), acc * alpha + sum<0>(cast<f32>(vt) * expand_dims<1>(p)),
                            kn, vn};
        });
    (void)kl;
    (void)vl;
    then(m, l, acc, used, len);
  };
  if (guarded)
    detail::when(s < used, attend);
  else
    attend();
}
} // namespace detail

/// Decode attention split over the sequence (flash-decoding), with the
/// merge in the same launch. The len = pos[b] + 1 keys of sequence b are
/// cut into spans of whole BN-key blocks, as even as S = num_programs(2)
/// programs (at most SPLITS) allow: program (b, h, s) attends to keys
/// s * span .. min(len, (s + 1) * span) - 1, loading each next block of
/// keys and values before it works on the current one, and writes its
/// running max, sum and unnormalised output to `part` ([B, H, S, D + 2],
/// f32: D outputs, then m and l). Programs past the last span (a short
/// sequence) do nothing. The last of the used programs of (b, h) to finish
/// (an atomic count in counter[b * H + h], which it resets to 0) merges
/// the parts: out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s with
/// M = max_s m_s (scores in base 2, one ex2 each).
/// Where one program has all the keys (S = 1, or a sequence of at most BN
/// keys) it writes the output directly: no part, count or merge. SPLITS =
/// 1 compiles only that path (a head a program: for short contexts, where
/// the merge's atomic round trip costs more than the keys).
///
/// Grid: (B, H, S). The grid does not depend on the positions, so one
/// captured graph serves every step, and a step's keys are spread over all
/// S programs of a head whatever its length: any cache length works.
///
/// Launched as a programmatic dependent (a decode step), the kernel reads
/// pos[b] and the keys of its first block below position pos[b] before it
/// waits on the kernel before it: no kernel since the step's first,
/// ordinary launch (ops::Embedding) may write those. The key at pos[b]
/// (the step's own), the values and q are read after the wait.
template <class T, int BN_, int D_, int SPLITS> struct AttentionDecode {
  static constexpr int BN = BN_, D = D_, Splits = SPLITS;
  /// The grid for B sequences of H heads: (B, H, SPLITS).
  static Grid grid(int64_t B, int64_t H) { return Grid(uint32_t(B), uint32_t(H), uint32_t(SPLITS)); }
  static_assert(SPLITS >= 1, "at least one program per head");
  /// Plain schedule, one stage; every thread loads at least 16 bytes of a
  /// key block.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return schedule == 0 && stages == 2 && BN_ * D_ * int(sizeof(typename T::host)) >= warps * 32 * 16;
  }
  void operator()(Ptr<T> qkv, Ptr<T> kc, Ptr<T> vc, Ptr<f32> part, Ptr<i32> counter, Ptr<T> out,
                  Ptr<i32> pos, I32 C, I32 Tmax, F32 scale) const {
    auto b = program_id(0), h = program_id(1), s = program_id(2);
    auto H = num_programs(1), S = num_programs(2);
    auto rd = arange<D>();
    detail::decode_attention_span<T, BN, D>(
        qkv, kc, vc, pos, C, Tmax, scale, b, h, s, S, /*guarded=*/true,
        [&](F32 m, F32 l, Tile<f32, D> acc, I32 used, I32) {
          // One program with keys (S = 1, or at most BN of them): it writes
          // the output itself, with no parts, count or merge.
          detail::when(used == 1, [&] { store(out + b * C + h * D + rd, cast<T>(acc / l)); });
          if constexpr (SPLITS > 1)
            detail::when(used > 1, [&] {
              auto parts = part + (b * H + h) * S * (D + 2);
              auto base = parts + s * (D + 2);
              store(base + rd, acc);
              store(base + D, m);
              store(base + D + 1, l);
              // The last used program of (b, h) merges the parts; its
              // atomic_add made every one of them visible.
              detail::when(atomic_add(counter + b * H + h, 1) == used - 1, [&] {
                auto rs = arange<SPLITS>();
                auto in = rs < used;
                auto ms = load(parts + rs * (D + 2) + D, in, kMaskedScore);
                auto ls = load(parts + rs * (D + 2) + D + 1, in, 0.0f);
                auto accs =
                    load(parts + expand_dims<1>(rs) * (D + 2) + expand_dims<0>(rd), expand_dims<1>(in), 0.0f);
                auto top = max(ms);
                auto w = where(in, exp2(ms - top), 0.0f); // (SPLITS)
                auto o = sum<0>(accs * expand_dims<1>(w)) / sum(w * ls);
                store(out + b * C + h * D + rd, cast<T>(o));
                store(counter + b * H + h, I32(0));
              });
            });
        });
  }
};

/// Decode attention split over the CLUSTER programs of a thread-block
/// cluster (sm_90 and newer; a thread per program on the CPU): the spans of
/// AttentionDecode with S = CLUSTER, but the programs' running max, sum and
/// output meet in the cluster's shared memory (one cluster_gather) instead
/// of global partials and an atomic count, and the program of rank 0
/// writes the merged output: no second memory round trip, no counter to
/// reset, the same work whatever the order the programs finish in. Programs
/// whose span is empty (a short sequence) still take part in the exchange,
/// with nothing to contribute.
///
/// Grid: (CLUSTER, H, B), the splits along x, where clusters are formed.
/// `part` and `counter` are not used (the signature is AttentionDecode's,
/// so that one launch site serves both).
template <class T, int BN_, int D_, int CLUSTER> struct AttentionDecodeCluster {
  static constexpr int BN = BN_, D = D_, Splits = CLUSTER;
  /// The grid for B sequences of H heads: (CLUSTER, H, B), the splits
  /// along x, where clusters are formed.
  static Grid grid(int64_t B, int64_t H) { return Grid(uint32_t(CLUSTER), uint32_t(H), uint32_t(B)); }
  static_assert(CLUSTER >= 2 && CLUSTER <= 8, "a cluster holds 2 to 8 programs");
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return AttentionDecode<T, BN_, D_, CLUSTER>::feasible(warps, stages, schedule);
  }
  void operator()(Ptr<T> qkv, Ptr<T> kc, Ptr<T> vc, Ptr<f32>, Ptr<i32>, Ptr<T> out, Ptr<i32> pos, I32 C,
                  I32 Tmax, F32 scale) const {
    auto s = program_id(0), h = program_id(1), b = program_id(2);
    auto rd = arange<D>();
    detail::decode_attention_span<T, BN, D>(
        qkv, kc, vc, pos, C, Tmax, scale, b, h, s, I32(CLUSTER), /*guarded=*/false,
        [&](F32 m, F32 l, Tile<f32, D> acc, I32 used, I32) {
          auto [ms, ls, accs] = cluster_gather<CLUSTER>(m, l, acc);
          auto in = arange<CLUSTER>() < used;
          auto w = where(in, exp2(ms - max(ms)), 0.0f); // (CLUSTER)
          auto o = sum<0>(accs * expand_dims<1>(w)) / sum(w * ls);
          detail::when(s == 0, [&] { store(out + b * C + h * D + rd, cast<T>(o)); });
        });
  }
};

/// Decode attention with a head's first CLUSTER * BN keys held in
/// registers. Program s of the CLUSTER programs of head h of sequence b
/// (a thread-block cluster where CLUSTER > 1) loads keys and values s * BN
/// .. s * BN + BN - 1 before its grid_dependency_wait, all but the step's
/// own (the key and value at pos[b], which the QKV kernel before it writes
/// into the cache); after the wait it loads the query and that own key
/// and value, scores its BN keys at once (one max and one sum over them,
/// not a running max a block) and sums its values. Sequences longer than
/// CLUSTER * BN keys are correct too: program s then goes on, online,
/// through the blocks s * BN + i * CLUSTER * BN, loaded after the wait. With
/// CLUSTER > 1 the programs' maxima, sums and outputs meet in the cluster's
/// shared memory (cluster_gather) and the program of rank 0 writes the
/// merged output. Scores are in base 2 (the scale and log2(e) folded into
/// one multiply, exp2).
///
/// For contexts up to CLUSTER * BN keys, where every key's load can be in
/// flight while the previous kernel ends; longer ones want the split
/// kernels above.
///
/// Grid: (CLUSTER, H, B). `part` and `counter` are not used (the signature
/// is AttentionDecode's, so that one launch site serves them all).
template <class T, int BN_, int D_, int CLUSTER = 1> struct AttentionDecodeResident {
  static constexpr int BN = BN_, D = D_, Splits = CLUSTER;
  static_assert(CLUSTER >= 1 && CLUSTER <= 8, "one program a head, or a cluster of 2 to 8");
  static Grid grid(int64_t B, int64_t H) { return Grid(uint32_t(CLUSTER), uint32_t(H), uint32_t(B)); }
  /// Plain schedule, one stage; every thread loads at least 16 bytes of a
  /// key block.
  static constexpr bool feasible(int warps, int stages, int schedule) {
    return AttentionDecode<T, BN_, D_, 1>::feasible(warps, stages, schedule);
  }
  void operator()(Ptr<T> qkv, Ptr<T> kc, Ptr<T> vc, Ptr<f32>, Ptr<i32>, Ptr<T> out, Ptr<i32> pos, I32 C,
                  I32 Tmax, F32 scale) const {
    auto s = program_id(0), h = program_id(1), b = program_id(2);
    launch_dependents();
    auto len = load(pos + b) + 1;
    auto rd = arange<D>();
    auto kbase = kc + b * Tmax * C + h * D;
    auto vbase = vc + b * Tmax * C + h * D;
    auto offsets = [&](Tile<i32, BN> rn) { return expand_dims<1>(rn) * C + expand_dims<0>(rd); };
    // Every earlier key and value of this program's block: no kernel of
    // the step before this one writes them.
    auto rn0 = s * BN + arange<BN>();
    auto earlier = expand_dims<1>(rn0 < len - 1);
    auto k_early = load(kbase + offsets(rn0), earlier, 0);
    auto v_early = load(vbase + offsets(rn0), earlier, 0);
    grid_dependency_wait();
    auto own = expand_dims<1>(rn0 == len - 1);
    auto k0 = where(own, load(kbase + offsets(rn0), own, 0), k_early);
    auto v0 = where(own, load(vbase + offsets(rn0), own, 0), v_early);
    // The query, loaded by each thread for the columns of k it holds.
    auto q = cast<f32>(load(qkv + b * (3 * C) + h * D + broadcast_to<BN, D>(expand_dims<0>(rd))));
    auto c = scale * detail::kLog2e;
    auto scores = [&](Tile<T, BN, D> kt, Tile<i32, BN> rn) {
      return where(rn < len, sum<1>(cast<f32>(kt) * q) * c, kMaskedScore);
    };
    auto sc = scores(k0, rn0);
    auto m0 = max(sc);
    auto p0 = where(rn0 < len, exp2(sc - m0), 0.0f);
    auto l0 = sum(p0);
    auto acc0 = sum<0>(cast<f32>(v0) * expand_dims<1>(p0));
    // Keys past the first CLUSTER * BN: online, a block at a time.
    auto [m, l, acc] = for_range(
        s * BN + CLUSTER * BN, len, CLUSTER * BN, std::tuple{m0, l0, acc0},
        [&](I32 n0, F32 m, F32 l, Tile<f32, D> acc) {
          auto rn = n0 + arange<BN>();
          auto valid = expand_dims<1>(rn < len);
          auto kt = load(kbase + offsets(rn), valid, 0);
          auto vt = load(vbase + offsets(rn), valid, 0);
          auto sn = scores(kt, rn);
          auto m_new = maximum(m, max(sn));
          auto p = where(rn < len, exp2(sn - m_new), 0.0f);
          auto alpha = exp2(m - m_new);
          return std::tuple{m_new, l * alpha + sum(p), acc * alpha + sum<0>(cast<f32>(vt) * expand_dims<1>(p))};
        });
    if constexpr (CLUSTER == 1) {
      store(out + b * C + h * D + rd, cast<T>(acc / l));
    } else {
      auto [ms, ls, accs] = cluster_gather<CLUSTER>(m, l, acc);
      auto in = arange<CLUSTER>() * BN < len; // programs with keys
      auto w = where(in, exp2(ms - max(ms)), 0.0f);
      auto o = sum<0>(accs * expand_dims<1>(w)) / sum(w * ls);
      detail::when(s == 0, [&] { store(out + b * C + h * D + rd, cast<T>(o)); });
    }
  }
};

} // namespace kiln::ops
