//===- autotune.hpp - pick the fastest kernel configuration ---------------===//
//
//   auto tuned = kiln::autotune<ops::Matmul<f16, 64, 64, 32>, ops::Matmul<f16, 128, 64, 32>>(
//       Target::cuda("sm_90a"), "matmul f16 M=4096 N=4096 K=4096", {{4, 8}, {1, 2}},
//       [&](const auto &k) {
//         using K = typename std::decay_t<decltype(k)>::kernel_type;
//         k.launch(Grid(ceil_div(M, K::BM), ceil_div(N, K::BN)), a, b, c, M, N, K_, K_, N, N);
//       });
//   tuned.run();   // launches the winner
//
// Candidates are the listed kernel types times the num_warps, num_stages
// and schedule values (a TuneSpace; a plain `{4, 8}` lists warps). They are
// compiled in parallel on host threads; each is timed (CUDA events with the L2
// flushed between runs, or wall clock on the CPU; see TuneTiming for kernels
// that run back to back, as a decode step's do); a candidate that fails to
// compile or launch scores +inf and never aborts tuning. The winner is
// persisted per (candidates, key, target, compiler) and reused by later runs,
// which then compile only the winner.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// One tuning candidate, type-erased.
struct TuneCandidate {
  std::string label;                                          ///< "Matmul_f16_64_64_32/w4"
  std::function<std::unique_ptr<CompiledKernel>()> compile;   ///< may throw Error
  std::function<void(const CompiledKernel &)> run;           ///< launches once
};

struct TuneResult {
  std::string label;
  double ms = std::numeric_limits<double>::infinity(); ///< +inf: failed (see error)
  std::string error;
};

/// How a candidate is timed on a GPU. By default each run is one launch,
/// timed alone (CUDA events, L2 flushed): right for kernels that run long
/// enough to hide the launch. A decode step's kernels take a few
/// microseconds each and run back to back in a CUDA graph, each waiting on
/// the one before (programmatic dependent launch): timed alone, every
/// candidate measures the ~5-9 us of a launch and the winner is noise. With
/// `chain` > 0 a run is a CUDA graph of `chain` launches of the candidate
/// captured once and replayed (L2 flushed before each replay), and its time
/// is the replay's over `chain`: what one launch adds to a step. The timing
/// is part of the persisted winner's key.
struct TuneTiming {
  int chain = 0;
};

/// The outcome of tuning: the winning kernel and how to launch it.
class Tuned {
public:
  const CompiledKernel &kernel() const { return *kernel_; }
  const std::string &label() const { return label_; }
  /// Launch the winner (with the launch function given to autotune).
  void run() const { run_(*kernel_); }
  /// Every candidate's time, when this call tuned (empty when the winner came from disk).
  const std::vector<TuneResult> &results() const { return results_; }
  bool from_disk() const { return from_disk_; }
  double tuning_seconds() const { return seconds_; }

private:
  friend Tuned autotune_candidates(const std::string &, const Target &, const std::string &,
                                   std::vector<TuneCandidate>, const std::function<bool(const std::string &)> &,
                                   const TuneTiming &);
  friend std::optional<Tuned> autotune_cached(const std::string &, const Target &, const std::string &,
                                              std::vector<TuneCandidate> &, const TuneTiming &);
  std::unique_ptr<CompiledKernel> kernel_;
  std::function<void(const CompiledKernel &)> run_;
  std::string label_;
  std::vector<TuneResult> results_;
  bool from_disk_ = false;
  double seconds_ = 0;
};

/// Tune type-erased candidates. `prune(label)` returning true drops a candidate
/// before compilation.
Tuned autotune_candidates(const std::string &family, const Target &target, const std::string &key,
                          std::vector<TuneCandidate> candidates,
                          const std::function<bool(const std::string &)> &prune = {},
                          const TuneTiming &timing = {});

/// The winner persisted for these candidates and key, compiled (usually a
/// kernel-cache hit); nothing when none was persisted or it no longer
/// compiles. Never tunes.
std::optional<Tuned> autotune_cached(const std::string &family, const Target &target,
                                     const std::string &key, std::vector<TuneCandidate> &candidates,
                                     const TuneTiming &timing = {});

/// Where winners are persisted: $KILN_CACHE_DIR/tuning (see KernelCache).
std::string tuning_directory();

/// How a kernel's programs are organised on sm_90a (see CompileOptions):
/// as written, with a producer warp issuing its TMA copies, or that and
/// persistent (programs loop over the grid's tiles).
enum class Schedule { Plain, WarpSpecialized, Persistent };

/// The label suffix of a schedule ("" for the plain one).
inline const char *schedule_suffix(Schedule s) {
  return s == Schedule::Persistent ? "/persistent" : s == Schedule::WarpSpecialized ? "/ws" : "";
}

/// The compile options to try for every kernel type.
struct TuneSpace {
  std::vector<int> num_warps{4};
  std::vector<int> num_stages{2};
  std::vector<Schedule> schedules{Schedule::Plain};
  TuneSpace() = default;
  /// `{4, 8}` lists warp counts.
  TuneSpace(std::initializer_list<int> warps) : num_warps(warps) {}
  TuneSpace(std::vector<int> warps, std::vector<int> stages, std::vector<Schedule> schedules = {Schedule::Plain})
      : num_warps(std::move(warps)), num_stages(std::move(stages)), schedules(std::move(schedules)) {}
};

/// Tune the kernel types `Ks...` times the options of `space` for problem `key`.
template <class... Ks, class Launch>
Tuned autotune(const Target &target, const std::string &key, TuneSpace space, Launch launch,
               const std::function<bool(const std::string &)> &prune = {}, const TuneTiming &timing = {}) {
  static_assert(sizeof...(Ks) > 0, "kiln::autotune: list at least one kernel type");
  if (target.kind == Target::Kind::Cpu)
    space = TuneSpace({1}, {2}); // warps, stages and schedules mean nothing on the CPU
  std::vector<TuneCandidate> candidates;
  std::string family;
  auto add = [&]<class K>() {
    std::string name = detail::kernel_name_from_type(typeid(K).name());
    family += name + ";";
    for (int w : space.num_warps)
      for (int st : space.num_stages)
        for (Schedule sched : space.schedules) {
          CompileOptions options;
          options.num_warps = w;
          options.num_stages = st;
          options.warp_specialize = sched != Schedule::Plain;
          options.persistent = sched == Schedule::Persistent;
          std::string label = name + "/w" + std::to_string(w);
          if (space.num_stages.size() > 1)
            label += "/s" + std::to_string(st);
          label += schedule_suffix(sched);
          candidates.push_back(TuneCandidate{
              label,
              [target, options] { return std::make_unique<Kernel<K>>(compile<K>(target, options)); },
              [launch](const CompiledKernel &k) { launch(static_cast<const Kernel<K> &>(k)); }});
        }
  };
  (add.template operator()<Ks>(), ...);
  return autotune_candidates(family, target, key, std::move(candidates), prune, timing);
}

} // namespace kiln
