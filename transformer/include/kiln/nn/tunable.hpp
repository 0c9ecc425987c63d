//===- tunable.hpp - a launch site whose kernel is tuned from a space ------===//
//
//   // One site: the decode step's 8-row product. Its space, its launch:
//   Tunable<const Linear &, Context &, const Tensor<D> &> site;
//   auto launch = []<class K>(const Kernel<K> &k, const Linear &self, Context &c,
//                             const Tensor<D> &x) { k.launch(Grid(...), ...); };
//   site.tune(ctx, space, "fc_decode8", "fc_decode8 8x768x3072", cached_only, launch,
//             *this, ctx, x);                    // times every candidate on x
//   if (site) site(*this, ctx, x);              // launches the winner
//
// A block keeps its heuristic kernel (a Handle, compiled with the others)
// and, once tuned, a Tunable that launches the winner of a declared space
// (tuning::product) instead. `launch` is a stateless generic lambda: it is
// instantiated for every kernel type of the space, called with the tuning's
// arguments while candidates are timed and with the block's arguments after.
// Tuning runs once per context and key (every layer's projection shares
// one winner), and winners persist per (space, key, GPU, compiler).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/nn/context.hpp"

#include "kiln/autotuner/space.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <typeinfo>

namespace kiln::nn {

template <class... A> class Tunable {
public:
  using Launch = std::function<void(const CompiledKernel &, A...)>;

  /// Whether tune() found a winner (the site launches it).
  explicit operator bool() const { return bool(tuned_); }
  const Tuned *tuned() const { return tuned_.get(); }

  /// Launches the winner.
  void operator()(A... a) const { launch_(tuned_->kernel(), a...); }

  /// Times the candidates of the next tune() as graphs of `launches`
  /// launches each (TuneTiming::chain): for the few-microsecond kernels of
  /// a decode step, which run back to back.
  Tunable &chained(int launches) {
    timing_.chain = launches;
    return *this;
  }

  /// Tunes the candidates of `space` for problem `key` (its shapes), timing
  /// `launch` with `args`, or with `cached_only` reads back a persisted
  /// winner (times nothing). True when the site now has a winner.
  template <class Space, class Site>
  bool tune(Context &ctx, Space space, const std::string &role, const std::string &key,
            bool cached_only, Site launch, A... args) {
    std::map<std::string, Launch> launchers;
    std::string family;
    tuning::for_each_candidate(space, ctx.target(),
                               [&]<class K>(const CompileOptions &, const std::string &label) {
                                 family += label + ";";
                                 launchers[label] = [launch](const CompiledKernel &k, A... a) {
                                   launch(static_cast<const Kernel<K> &>(k), a...);
                                 };
                               });
    std::tuple<A...> held(args...);
    auto timed = [launch, held](const auto &k) {
      std::apply([&](auto &&...a) { launch(k, a...); }, held);
    };
    std::string shared = key + " " + family + (cached_only ? " cached" : "") + " chain " +
                         std::to_string(timing_.chain);
    auto t = ctx.tuned(shared, role, [&]() -> std::optional<Tuned> {
      if (cached_only)
        return tuning::cached(space, ctx.target(), key, timed, timing_);
      return tuning::autotune(space, ctx.target(), key, timed, {}, timing_);
    });
    if (!t)
      return false;
    auto found = launchers.find(t->label());
    if (found == launchers.end())
      throw Error("nn: the tuned kernel " + t->label() + " of " + key + " is not in its space");
    tuned_ = std::move(t);
    launch_ = found->second;
    return true;
  }

private:
  std::shared_ptr<const Tuned> tuned_;
  Launch launch_;
  TuneTiming timing_;
};

namespace detail {
/// Rows a tuned configuration serves: launches of M rows use the one tuned
/// for rowsBucket(M), the next power of two from 16.
inline int64_t rowsBucket(int64_t rows) {
  int64_t b = 16;
  while (b < rows)
    b *= 2;
  return b;
}
} // namespace detail

/// A block's tuned launches by row bucket (detail::rowsBucket): launches
/// of M rows use the site tuned for M's bucket, if any.
template <class... A> class TunedByRows {
public:
  using Site = Tunable<A...>;
  /// The site of rows' bucket; null when that bucket has none.
  const Site *find(int64_t rows) const {
    auto t = sites_.find(detail::rowsBucket(rows));
    return t == sites_.end() ? nullptr : &t->second;
  }
  /// The tuned kernel launches of `rows` rows use; null when heuristic.
  const Tuned *tuned_for(int64_t rows) const {
    const Site *s = find(rows);
    return s ? s->tuned() : nullptr;
  }
  /// Tunes the bucket of `rows` once: `tune(site, bucket)` tunes a fresh
  /// site and returns whether it found a winner, which is then kept.
  template <class F> void tune(int64_t rows, F &&tune) {
    int64_t bucket = detail::rowsBucket(rows);
    if (sites_.count(bucket))
      return;
    Site site;
    if (tune(site, bucket))
      sites_[bucket] = std::move(site);
  }

private:
  std::map<int64_t, Site> sites_;
};

} // namespace kiln::nn
