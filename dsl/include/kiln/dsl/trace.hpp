//===- trace.hpp - loops and tracing a kernel into a kiln module ----------===//
#pragma once

#include "kiln/dsl/tile.hpp"

#include <concepts>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>

namespace kiln {

namespace detail {
template <class X> I32 as_i32(X x) {
  if constexpr (is_tile_v<X>) {
    static_assert(std::is_same_v<X, I32>, "kiln::for_range: bounds must be i32 scalars");
    return x;
  } else {
    static_assert(std::is_integral_v<X>, "kiln::for_range: bounds must be integers");
    return I32(constant(DType::I32, double(x), {}));
  }
}
/// The i-th handle of `vs` as the i-th tile type of `C`.
template <class... C, std::size_t... I>
std::tuple<C...> wrap_values(const std::vector<V> &vs, std::index_sequence<I...>) {
  return std::tuple<C...>(C(vs[I])...);
}
template <class X> struct is_tuple : std::false_type {};
template <class... X> struct is_tuple<std::tuple<X...>> : std::true_type {};
} // namespace detail

/// `for (i = lo; i < hi; i += step)` carrying the values `init` through the
/// iterations: `body(i, carried...)` returns the next carried values (a tile
/// or a std::tuple of tiles), and the final values are returned.
///
///   auto acc = for_range(0, K, BLOCK_K, zeros<f32, BM, BN>(),
///                        [&](I32 k, auto acc) { return dot(a(k), b(k), acc); });
template <class Lo, class Hi, class Step, class Init, class Body>
Init for_range(Lo lo, Hi hi, Step step, Init init, Body body) {
  auto run = [&](auto... carried) {
    std::array<detail::V, sizeof...(carried)> in{carried.v...};
    auto frame = detail::begin_for(detail::as_i32(lo).v, detail::as_i32(hi).v,
                                   detail::as_i32(step).v, in);
    using Seq = std::index_sequence_for<decltype(carried)...>;
    auto args = detail::wrap_values<decltype(carried)...>(frame.args, Seq{});
    auto next = std::apply([&](auto... a) { return body(I32(frame.iv), a...); }, args);
    static_assert(std::is_same_v<decltype(next), Init>,
                  "kiln::for_range: the body must return values of the carried types");
    std::vector<detail::V> out;
    if constexpr (detail::is_tuple<Init>::value)
      std::apply([&](auto... t) { (out.push_back(t.v), ...); }, next);
    else
      out.push_back(next.v);
    auto res = detail::end_for(out);
    auto results = detail::wrap_values<decltype(carried)...>(res, Seq{});
    if constexpr (detail::is_tuple<Init>::value)
      return results;
    else
      return std::get<0>(results);
  };
  if constexpr (detail::is_tuple<Init>::value)
    return std::apply(run, init);
  else
    return run(init);
}

/// A loop without carried values.
template <class Lo, class Hi, class Step, class Body>
void for_range(Lo lo, Hi hi, Step step, Body body) {
  auto frame = detail::begin_for(detail::as_i32(lo).v, detail::as_i32(hi).v,
                                 detail::as_i32(step).v, {});
  body(I32(frame.iv));
  detail::end_for({});
}

namespace detail {
template <class X> struct ParamOf {
  static_assert(sizeof(X) == 0, "kiln: kernel parameters must be scalars (I32, I64, F32, ...) or "
                                "pointers (Ptr<T>) taken by value");
};
template <class T> struct ParamOf<Tile<T>> {
  static Param desc() {
    if constexpr (is_ptr_v<T>)
      return {T::element::id, true};
    else
      return {T::id, false};
  }
};

template <class F> struct Signature;
template <class K, class... A> struct Signature<void (K::*)(A...) const> {
  using args = std::tuple<A...>;
  static constexpr std::size_t arity = sizeof...(A);
  static std::array<Param, sizeof...(A)> params() { return {ParamOf<A>::desc()...}; }
};

std::string kernel_name_from_type(const char *mangled);

/// A kernel object whose configuration is data: `config()` names the values
/// (rows, widths, epilogue, ...) that its fields fix at trace time, as
/// Triton's tl.constexpr arguments do. Its tile shapes and dtypes stay in
/// its type.
template <class K>
concept ConfiguredKernel = requires(const K &k) {
  { k.config() } -> std::convertible_to<std::string>;
};

/// `K`'s name from its type (`ops::Softmax<f16, 1024>` -> `Softmax_f16_1024`),
/// followed by the configuration of a ConfiguredKernel
/// (`DecodeLinear_f16_8_256_r1_k768_ln0_bias`).
template <class K> std::string kernel_name(const K &kernel) {
  std::string name = kernel_name_from_type(typeid(K).name());
  if constexpr (ConfiguredKernel<K>) {
    std::string config = kernel.config();
    if (!config.empty())
      name += "_" + config;
  }
  return name;
}

template <class K, std::size_t... I> void call_kernel(const K &k, std::index_sequence<I...>) {
  using Sig = Signature<decltype(&K::operator())>;
  k(std::tuple_element_t<I, typename Sig::args>(param(int(I)))...);
}
} // namespace detail

/// Trace `kernel` (a callable whose operator() takes kernel parameters and
/// returns void) into a kiln module.
template <class K> TracedModulePtr trace(const K &kernel, std::string name = "") {
  using Sig = detail::Signature<decltype(&K::operator())>;
  if (name.empty())
    name = detail::kernel_name(kernel);
  auto params = Sig::params();
  detail::begin_kernel(name, params);
  try {
    detail::call_kernel(kernel, std::make_index_sequence<Sig::arity>{});
  } catch (...) {
    detail::abort_kernel();
    throw;
  }
  return detail::end_kernel();
}

} // namespace kiln
