//===- context.hpp - where blocks get their kernels and launch them --------===//
//
//   nn::Context ctx(Target::cuda(cuda::device_arch()));
//   nn::LayerNorm<f16> ln(ctx, w, b);        // asks ctx for its kernels
//   nn::Linear<f16, nn::Epilogue::Bias> qkv(ctx, W, bias);
//   ctx.compile();                           // every kernel, in parallel
//   ln(ctx, x, h);                           // typed launches
//
// Blocks declare the kernels they need as typed handles (`Handle<K>`); the
// context compiles them all at once on the host's cores and shares one
// compiled kernel between blocks that ask for the same type and options
// (every layer's projection uses one kernel). A handle launches with
// arguments checked against `K`'s C++ signature at compile time, and the
// context counts launches and, while profiling, names each one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/autotuner/autotune.hpp"
#include "kiln/kiln.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace kiln::nn {

class Context;

/// A kernel a block launches: `K` once the context has compiled it.
template <class K> class Handle {
public:
  using kernel_type = K;
  Handle() = default;

  /// Launches on `ctx`'s stream with `args` checked against K's signature.
  template <class... A> void operator()(Context &ctx, const Grid &grid, const A &...args) const;

  bool ready() const { return slot_ && slot_->has_value(); }
  const Kernel<K> &kernel() const {
    if (!ready())
      throw Error("nn: kernel " + role_ + " is not compiled yet (call Context::compile)");
    return **slot_;
  }
  const std::string &role() const { return role_; }

private:
  friend class Context;
  std::shared_ptr<std::optional<Kernel<K>>> slot_;
  std::string role_;
};

/// What a context compiled, for `--explain`.
struct KernelRecord {
  std::string name;  ///< carries the block sizes
  std::string role;  ///< the first block that asked for it ("qkv", "layernorm", ...)
  double compile_seconds = 0;
  bool from_cache = false;
  int num_warps = 0, num_stages = 0;
  /// Where the configuration came from: "heuristic" (the block's default
  /// for this GPU), "tuned" (timed on this GPU by this process), or
  /// "tuning cache" (an earlier tuning's winner, read from disk).
  std::string source = "heuristic";
};

class Context {
public:
  explicit Context(Target target) : target_(std::move(target)) {}
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  const Target &target() const { return target_; }
  bool gpu() const { return target_.kind == Target::Kind::Cuda; }

  /// A handle to `kernel` (a K, whose fields may hold its configuration)
  /// compiled with `options`, compiled by the next compile(). Blocks asking
  /// for the same K, configuration and options share it.
  template <class K> Handle<K> kernel(const std::string &role, CompileOptions options = {}, const K &kernel = K{}) {
    std::string key = std::string(typeid(K).name()) + "/" + detail::kernel_name(kernel) + "/w" +
                      std::to_string(options.num_warps) +
                      "/s" + std::to_string(options.num_stages) +
                      (options.warp_specialize ? "/ws" : "") + (options.persistent ? "/p" : "");
    Handle<K> h;
    h.role_ = role;
    auto found = shared_.find(key);
    if (found != shared_.end()) {
      h.slot_ = std::static_pointer_cast<std::optional<Kernel<K>>>(found->second);
      return h;
    }
    h.slot_ = std::make_shared<std::optional<Kernel<K>>>();
    shared_.emplace(key, h.slot_);
    pending_.push_back([this, slot = h.slot_, role, options, kernel] {
      Kernel<K> k = kiln::compile<K>(target_, options, kernel);
      std::lock_guard<std::mutex> lock(mutex_);
      records_.push_back({k.name(), role, k.compile_seconds(), k.from_cache(), options.num_warps,
                          options.num_stages, "heuristic"});
      slot->emplace(std::move(k));
    });
    return h;
  }

  /// A tuned kernel shared by every block that tunes the same product
  /// (`key`: role, kernel family and shape): tune() runs once per context
  /// and key; null when it found nothing (a cache-only lookup).
  std::shared_ptr<const Tuned> tuned(const std::string &key, const std::string &role,
                                     const std::function<std::optional<Tuned>()> &tune);
  /// Seconds spent tuning (compiling and timing candidates) in this context.
  double tuning_seconds() const { return tuningSeconds_; }

  /// Counts a launch made outside a Handle (a tuned kernel) under `role`.
  void count_launch(const std::string &role) {
    ++launches_;
    if (on_launch)
      on_launch(role);
  }

  /// Compiles every kernel asked for since the last call, one per core.
  /// Rethrows the first failure.
  void compile();

  /// Kernels compiled so far, sorted by role.
  const std::vector<KernelRecord> &kernels() const { return records_; }
  double compile_seconds() const;

  /// Launches since reset_launches().
  int launches() const { return launches_; }
  void reset_launches() { launches_ = 0; }

  /// While set, called after every launch with the launching handle's role
  /// (profiling marks a CUDA event there).
  std::function<void(const std::string &)> on_launch;

  /// Roles whose launches are skipped (neither made nor counted): profiling
  /// times a decode step's graph without one role's kernels, to find what
  /// they add to the step where they overlap with their neighbours. The
  /// results of such a step are meaningless.
  std::set<std::string> elide;
  bool elided(const std::string &role) const { return !elide.empty() && elide.count(role) != 0; }
  /// Makes one launch under `role` (`launch()`) and counts it, unless the
  /// role is elided.
  template <class F> void launch_as(const std::string &role, F &&launch) {
    if (elided(role))
      return;
    std::forward<F>(launch)();
    count_launch(role);
  }

private:
  template <class K> friend class Handle;
  Target target_;
  std::map<std::string, std::shared_ptr<void>> shared_;
  std::vector<std::function<void()>> pending_;
  std::vector<KernelRecord> records_;
  std::map<std::string, std::shared_ptr<const Tuned>> tuned_;
  std::mutex mutex_;
  int launches_ = 0;
  double tuningSeconds_ = 0;
};

template <class K>
template <class... A>
void Handle<K>::operator()(Context &ctx, const Grid &grid, const A &...args) const {
  ctx.launch_as(role_, [&] { kernel().launch(grid, args...); });
}

} // namespace kiln::nn
