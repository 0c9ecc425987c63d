//===- space.hpp - tuning spaces declared and pruned at compile time -------===//
//
//   namespace hana = boost::hana;
//   constexpr auto space = tuning::product(
//       hana::tuple_t<ops::MatmulBias<f16, 64, 128, 64>, ops::MatmulBias<f16, 32, 64, 64>>,
//       tuning::kWarps, tuning::kStages, tuning::kSchedules);
//   Tuned t = tuning::autotune(space, target, "qkv 256x768x2304", launch);
//
// A space is the Cartesian product of kernel types (their tile sizes are
// template parameters) and compile options (warps, pipeline stages,
// schedule) as integral constants, filtered by `feasible`, a constexpr
// predicate: a candidate whose pipeline does not fit in shared memory, or
// that asks for a producer warp without the 64-column K panels TMA copies
// need, is never instantiated, compiled or timed. Kernels other than tiled
// products (decode-step GEMVs, attention, row-wise kernels) declare their
// own limits as `static constexpr bool feasible(warps, stages, schedule)`.
// The same declarations serve kiln_bench and the blocks of kiln::nn.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/autotuner/autotune.hpp"

#include <boost/hana.hpp>

#include <algorithm>
#include <concepts>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::tuning {

namespace hana = boost::hana;

/// Warps per program, pipeline stages, and schedules (Schedule's values).
inline constexpr auto kWarps = hana::tuple_c<int, 4, 8>;
inline constexpr auto kStages = hana::tuple_c<int, 2, 3, 4>;
inline constexpr auto kSchedules =
    hana::tuple_c<int, int(Schedule::Plain), int(Schedule::WarpSpecialized), int(Schedule::Persistent)>;

/// Shared memory one program may use on sm_90 (227 KB).
inline constexpr int kSharedMemoryBytes = 227 * 1024;

/// Bytes of one element of a tiled kernel's inputs: Op<T, BM, BN, BK>.
template <class K> struct ElementBytes;
template <template <class, int, int, int> class Op, class T, int BM, int BN, int BK>
struct ElementBytes<Op<T, BM, BN, BK>> : std::integral_constant<int, int(sizeof(typename T::host))> {};

/// Shared memory of `stages` A and B tiles.
template <class K> constexpr int pipeline_bytes(int stages) {
  return stages * (K::BM * K::BK + K::BK * K::BN) * ElementBytes<K>::value;
}

/// A kernel that states itself which options it runs with:
///   static constexpr bool feasible(int warps, int stages, int schedule);
template <class K>
concept DeclaresFeasibility = requires {
  { K::feasible(4, 2, 0) } -> std::convertible_to<bool>;
};

/// Whether kernel K can run with these options at all: as K declares, or
/// for a tiled product (Op<T, BM, BN, BK>) when its pipeline fits in shared
/// memory, every warp owns at least a 16x16 accumulator tile, and producer
/// warps get the 64-column K panels their TMA copies need.
template <class K> constexpr bool feasible(int warps, int stages, int schedule) {
  if constexpr (DeclaresFeasibility<K>) {
    return K::feasible(warps, stages, schedule);
  } else {
    bool fits = pipeline_bytes<K>(stages) <= kSharedMemoryBytes;
    bool panels = schedule == int(Schedule::Plain) || K::BK >= 64;
    bool work = K::BM * K::BN >= warps * 256;
    return fits && panels && work;
  }
}

/// Options of kernels that neither pipeline nor specialise warps (decode
/// steps, row-wise kernels): warps only.
inline constexpr auto kRowWarps = hana::tuple_c<int, 1, 2, 4, 8>;
inline constexpr auto kNoStages = hana::tuple_c<int, 2>;
inline constexpr auto kPlainOnly = hana::tuple_c<int, int(Schedule::Plain)>;

/// Every feasible (kernel type, warps, stages, schedule) of the product, as
/// a hana tuple of tuples (type, int, int, int), pruned at compile time.
/// Kernels is a hana tuple of types (hana::tuple_t<...>).
template <class Kernels, class Warps, class Stages, class Schedules>
constexpr auto product(Kernels kernels, Warps warps, Stages stages, Schedules schedules) {
  auto all = hana::cartesian_product(hana::make_tuple(kernels, warps, stages, schedules));
  return hana::filter(all, [](auto c) {
    using K = typename decltype(+hana::at_c<0>(c))::type;
    constexpr int w = decltype(+hana::at_c<1>(c))::value;
    constexpr int s = decltype(+hana::at_c<2>(c))::value;
    constexpr int sch = decltype(+hana::at_c<3>(c))::value;
    return hana::bool_c<feasible<K>(w, s, sch)>;
  });
}

/// Number of candidates in a space (a compile-time constant).
template <class Space> constexpr std::size_t size(Space s) { return decltype(hana::length(s))::value; }

/// Calls `f.template operator()<K>(options, label)` for every candidate of
/// `space` that runs on `target`: producer-warp schedules need sm_90a, and
/// on the CPU only the first plain candidate of each kernel type remains,
/// labelled /w1 (warps, stages and schedules mean nothing there).
template <class Space, class F> void for_each_candidate(Space space, const Target &target, F &&f) {
  bool hopper = target.kind == Target::Kind::Cuda && target.arch == "sm_90a";
  bool cpu = target.kind == Target::Kind::Cpu;
  std::vector<std::string> seen; // on the CPU: kernel types given a candidate
  hana::for_each(space, [&](auto c) {
    using K = typename decltype(+hana::at_c<0>(c))::type;
    constexpr int w = decltype(+hana::at_c<1>(c))::value;
    constexpr int s = decltype(+hana::at_c<2>(c))::value;
    constexpr auto sch = Schedule(decltype(+hana::at_c<3>(c))::value);
    if (sch != Schedule::Plain && !hopper)
      return;
    std::string name = detail::kernel_name_from_type(typeid(K).name());
    if (cpu) {
      if (sch != Schedule::Plain || std::find(seen.begin(), seen.end(), name) != seen.end())
        return;
      seen.push_back(name);
    }
    CompileOptions options;
    options.num_warps = cpu ? 1 : w;
    options.num_stages = s;
    options.warp_specialize = sch != Schedule::Plain;
    options.persistent = sch == Schedule::Persistent;
    std::string label = name + "/w" + std::to_string(cpu ? 1 : w) + "/s" + std::to_string(s) +
                        schedule_suffix(sch);
    f.template operator()<K>(options, label);
  });
}

/// Type-erased candidates of `space` (launch(kernel) launches a compiled
/// Kernel<K> once) and their family name.
template <class Space, class Launch>
std::pair<std::vector<TuneCandidate>, std::string> candidates(Space space, const Target &target, Launch launch) {
  std::vector<TuneCandidate> out;
  std::string family;
  for_each_candidate(space, target, [&]<class K>(const CompileOptions &options, const std::string &label) {
    family += label + ";";
    out.push_back(TuneCandidate{
        label,
        [target, options] { return std::make_unique<Kernel<K>>(compile<K>(target, options)); },
        [launch](const CompiledKernel &k) { launch(static_cast<const Kernel<K> &>(k)); }});
  });
  return {std::move(out), family};
}

/// Tunes every candidate of `space` for problem `key`. The winner persists
/// per (candidates, key, target, compiler), as kiln::autotune's do.
template <class Space, class Launch>
Tuned autotune(Space space, const Target &target, const std::string &key, Launch launch,
               const std::function<bool(const std::string &)> &prune = {}, const TuneTiming &timing = {}) {
  auto [list, family] = candidates(space, target, launch);
  return autotune_candidates(family, target, key, std::move(list), prune, timing);
}

/// The winner an earlier autotune(space, target, key, ...) persisted, if any.
template <class Space, class Launch>
std::optional<Tuned> cached(Space space, const Target &target, const std::string &key, Launch launch,
                            const TuneTiming &timing = {}) {
  auto [list, family] = candidates(space, target, launch);
  return autotune_cached(family, target, key, list, timing);
}

} // namespace kiln::tuning
