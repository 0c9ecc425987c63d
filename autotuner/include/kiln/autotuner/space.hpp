//===- space.hpp - tuning spaces as data ------------------------------------===//
//
//   namespace hana = boost::hana;
//   auto space = tuning::product(
//       hana::tuple_t<ops::MatmulBias<f16, 64, 128, 64>, ops::MatmulBias<f16, 32, 64, 64>>,
//       tuning::kWarps, tuning::kStages, tuning::kSchedules);
//   Tuned t = tuning::autotune(space, target, "qkv 256x768x2304", launch);
//
// A space is a list of candidates: kernel objects of a small, declared set
// of tile types (Candidates<Ks...>) with the compile options to time them
// with (warps, pipeline stages, schedule). The tile types are the only part
// compiled into the host program, once each; a kernel's other configuration
// (rows, widths, epilogues: fields of the kernel object) and the options
// are values the tuner iterates at run time, so a space can name
// configurations that no type lists. `product` builds the Cartesian
// product of types and options filtered by `feasible`: a candidate whose
// pipeline does not fit in shared memory, or that asks for a producer warp
// without the 64-column K panels TMA copies need, is never compiled or
// timed. Kernels other than tiled products (decode-step GEMVs, attention,
// row-wise kernels) declare their own limits as `feasible(warps, stages,
// schedule)`, static or, where it depends on the configuration, a member.
// The same declarations serve kiln_bench and the blocks of kiln::nn.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/autotuner/autotune.hpp"

#include <boost/hana.hpp>

#include <algorithm>
#include <iterator>
#include <concepts>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
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

/// The label of a candidate: the kernel's name and its options.
inline std::string candidate_label(const std::string &name, const CompileOptions &options) {
  Schedule sch = options.persistent ? Schedule::Persistent
                 : options.warp_specialize ? Schedule::WarpSpecialized
                                           : Schedule::Plain;
  return name + "/w" + std::to_string(options.num_warps) + "/s" + std::to_string(options.num_stages) +
         schedule_suffix(sch);
}

/// A tuning space as data: kernel objects of the tile types Ks... (their
/// fields hold the configuration values: rows, widths, epilogues, ...), each
/// with the compile options to time it with. Only the tile types are
/// compiled into the host program; everything else is a value the tuner
/// iterates at run time.
///
///   tuning::Candidates<ops::DecodeLinear<f16, 4>, ops::DecodeLinear<f16, 8>> space;
///   space.add_feasible(ops::DecodeLinear<f16, 8>{.rows = 1, .k = 768}, {1, 2, 4, 8});
template <class... Ks> class Candidates {
public:
  /// Adds `kernel` with `options`.
  template <class K> Candidates &add(const K &kernel, const CompileOptions &options) {
    std::get<std::vector<std::pair<K, CompileOptions>>>(lists_).emplace_back(kernel, options);
    return *this;
  }
  /// Adds `kernel` with each warp count of `warps` that its
  /// `feasible(warps, stages, schedule)` allows (the plain schedule, 2
  /// stages).
  template <class K> Candidates &add_feasible(const K &kernel, std::initializer_list<int> warps) {
    for (int w : warps)
      if (kernel.feasible(w, 2, int(Schedule::Plain))) {
        CompileOptions options;
        options.num_warps = w;
        add(kernel, options);
      }
    return *this;
  }
  std::size_t size() const {
    return std::apply([](const auto &...l) { return (std::size_t(0) + ... + l.size()); }, lists_);
  }
  bool empty() const { return size() == 0; }

  /// Calls f(kernel, options) for every candidate, whatever the target.
  template <class F> void for_each_entry(F &&f) const {
    std::apply([&](const auto &...l) { (..., [&] {
                                         for (const auto &[kernel, options] : l)
                                           f(kernel, options);
                                       }()); },
               lists_);
  }

  /// Calls `f.template operator()<K>(kernel, options, label)` for every
  /// candidate that runs on `target`, as for_each_candidate does for a
  /// declared space.
  template <class F> void for_each(const Target &target, F &&f) const {
    bool hopper = target.kind == Target::Kind::Cuda && target.arch == "sm_90a";
    bool cpu = target.kind == Target::Kind::Cpu;
    std::vector<std::string> seen;
    auto visit = [&]<class K>(const std::vector<std::pair<K, CompileOptions>> &list) {
      for (const auto &[kernel, given] : list) {
        if (given.warp_specialize && !hopper)
          continue;
        std::string name = detail::kernel_name(kernel);
        CompileOptions options = given;
        if (cpu) {
          if (given.warp_specialize || std::find(seen.begin(), seen.end(), name) != seen.end())
            continue;
          seen.push_back(name);
          options.num_warps = 1;
        }
        f.template operator()<K>(kernel, options, candidate_label(name, options));
      }
    };
    std::apply([&](const auto &...l) { (visit(l), ...); }, lists_);
  }

private:
  std::tuple<std::vector<std::pair<Ks, CompileOptions>>...> lists_;
};

/// for_each_candidate over a space given as data.
template <class... Ks, class F> void for_each_candidate(const Candidates<Ks...> &space, const Target &target, F &&f) {
  space.for_each(target, [&]<class K>(const K &, const CompileOptions &options, const std::string &label) {
    f.template operator()<K>(options, label);
  });
}

namespace detail {
/// The ints of a hana::tuple_c or of a range.
template <class Ints> std::vector<int> ints(const Ints &xs) {
  if constexpr (hana::Foldable<Ints>::value)
    return hana::unpack(xs, [](auto... x) { return std::vector<int>{int(decltype(x)::value)...}; });
  else
    return std::vector<int>(std::begin(xs), std::end(xs));
}
} // namespace detail

/// The product of kernel types (a hana::tuple_t: their tile shapes) and
/// compile options (warps, pipeline stages, schedules: lists of values),
/// pruned by `feasible`: a candidate whose pipeline does not fit in shared
/// memory, or that asks for a producer warp without the 64-column K panels
/// TMA copies need, is never compiled or timed. The types are compiled into
/// the host program once each; the options are data iterated at run time.
template <class Kernels, class Warps, class Stages, class Schedules>
auto product(Kernels kernels, const Warps &warps, const Stages &stages, const Schedules &schedules) {
  auto space = hana::unpack(kernels, [](auto... t) { return Candidates<typename decltype(t)::type...>{}; });
  std::vector<int> ws = detail::ints(warps), ss = detail::ints(stages), schs = detail::ints(schedules);
  hana::for_each(kernels, [&](auto t) {
    using K = typename decltype(t)::type;
    for (int w : ws)
      for (int st : ss)
        for (int sch : schs)
          if (feasible<K>(w, st, sch)) {
            CompileOptions options;
            options.num_warps = w;
            options.num_stages = st;
            options.warp_specialize = sch != int(Schedule::Plain);
            options.persistent = sch == int(Schedule::Persistent);
            space.add(K{}, options);
          }
  });
  return space;
}

/// The candidates of `a`, then those of `b`.
template <class... A, class... B> Candidates<A..., B...> join(const Candidates<A...> &a, const Candidates<B...> &b) {
  Candidates<A..., B...> out;
  auto copy = [&](const auto &from) {
    from.for_each_entry([&](const auto &kernel, const CompileOptions &options) { out.add(kernel, options); });
  };
  copy(a);
  copy(b);
  return out;
}

/// Type-erased candidates of a space given as data, and their family name.
template <class... Ks, class Launch>
std::pair<std::vector<TuneCandidate>, std::string> candidates(const Candidates<Ks...> &space, const Target &target,
                                                              Launch launch) {
  std::vector<TuneCandidate> out;
  std::string family;
  space.for_each(target, [&]<class K>(const K &kernel, const CompileOptions &options, const std::string &label) {
    family += label + ";";
    out.push_back(TuneCandidate{
        label,
        [target, options, kernel] { return std::make_unique<Kernel<K>>(compile<K>(target, options, kernel)); },
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
