//===- tile.hpp - typed tiles and the operations on them ------------------===//
//
// `Tile<T, Dims...>` is a value of the kernel being traced: a scalar when
// `Dims` is empty, otherwise a statically shaped tile. Dtype and shape live in
// the C++ type, so mixing dtypes, broadcasting incompatible shapes or a `dot`
// with mismatched K fails to compile with a `static_assert` message. Every
// operation appends kiln ops to the kernel being traced (see emit.hpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/dsl/emit.hpp"

#include <array>
#include <cstddef>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln {

template <class T, int... Dims> struct Tile;

namespace detail {

template <std::size_t R> struct ShapeResult {
  std::array<int, R> dims{};
  bool ok = true;
};

/// Numpy-style broadcast of two static shapes (right-aligned; each pair of
/// dimensions must match or one of them must be 1).
template <std::size_t RA, std::size_t RB>
constexpr auto broadcast_shape(std::array<int, RA> a, std::array<int, RB> b) {
  constexpr std::size_t R = RA > RB ? RA : RB;
  ShapeResult<R> out;
  for (std::size_t i = 0; i < R; ++i) {
    int da = i < R - RA ? 1 : a[i - (R - RA)];
    int db = i < R - RB ? 1 : b[i - (R - RB)];
    if (da != db && da != 1 && db != 1)
      out.ok = false;
    out.dims[i] = da == 1 ? db : da;
  }
  return out;
}

template <std::size_t R>
constexpr std::array<int, R - 1> drop_axis(std::array<int, R> a, int axis) {
  std::array<int, R - 1> out{};
  for (std::size_t i = 0, j = 0; i < R; ++i)
    if (int(i) != axis)
      out[j++] = a[i];
  return out;
}

template <std::size_t R>
constexpr std::array<int, R + 1> insert_axis(std::array<int, R> a, int axis) {
  std::array<int, R + 1> out{};
  for (std::size_t i = 0, j = 0; i < R + 1; ++i)
    out[i] = int(i) == axis ? 1 : a[j++];
  return out;
}

template <class T, auto Arr, class Seq> struct TileOfArray;
template <class T, auto Arr, std::size_t... I>
struct TileOfArray<T, Arr, std::index_sequence<I...>> {
  using type = Tile<T, Arr[I]...>;
};
/// `Tile<T, Arr[0], Arr[1], ...>`.
template <class T, auto Arr>
using tile_of = typename TileOfArray<T, Arr, std::make_index_sequence<Arr.size()>>::type;

template <class A, class B> struct Broadcast;
template <class T, int... A, class U, int... B> struct Broadcast<Tile<T, A...>, Tile<U, B...>> {
  static constexpr auto result =
      broadcast_shape(std::array<int, sizeof...(A)>{A...}, std::array<int, sizeof...(B)>{B...});
  static constexpr bool ok = result.ok;
  template <class E> using tile = tile_of<E, result.dims>;
};

template <class X> struct is_tile : std::false_type {};
template <class T, int... D> struct is_tile<Tile<T, D...>> : std::true_type {};
template <class X> inline constexpr bool is_tile_v = is_tile<std::remove_cvref_t<X>>::value;
template <class X> struct is_ptr_tile : std::false_type {};
template <class E, int... D> struct is_ptr_tile<Tile<ptr<E>, D...>> : std::true_type {};
/// True for tiles (and scalars) of pointers.
template <class X> inline constexpr bool is_ptr_tile_v = is_ptr_tile<std::remove_cvref_t<X>>::value;

template <class S> inline constexpr bool is_literal_v =
    std::is_arithmetic_v<std::remove_cvref_t<S>> && !std::is_same_v<std::remove_cvref_t<S>, bool>;

template <class T, int... D> std::span<const int> shape_span() {
  static constexpr std::array<int, sizeof...(D)> s{D...};
  return {s.data(), s.size()};
}

/// A rank-0 constant of dtype `T` (the offset type i32 for pointers).
template <class T, class S> auto literal(S s) {
  if constexpr (is_ptr_v<T>) {
    static_assert(std::is_integral_v<S>, "kiln: pointers can only be offset by integers");
    return Tile<i32>(constant(DType::I32, double(s), {}));
  } else {
    static_assert(!(is_int_v<T> && std::is_floating_point_v<S>),
                  "kiln: a floating-point literal cannot be combined with an integer tile; "
                  "cast the tile with cast<f32>() first");
    return Tile<T>(constant(T::id, double(s), {}));
  }
}

/// Bring `x` (a tile or a literal of dtype T) to the tile type `To`.
template <class To, class X> auto to_shape(X x) {
  if constexpr (is_tile_v<X>) {
    if constexpr (std::is_same_v<std::remove_cvref_t<X>, To>)
      return x;
    else
      return To(broadcast_to(x.v, To::shape_span()));
  } else {
    return To(broadcast_to(literal<typename To::dtype>(x).v, To::shape_span()));
  }
}

template <class X> struct as_tile { using type = std::remove_cvref_t<X>; };

} // namespace detail

/// A traced value: scalar (`Tile<f32>`) or tile (`Tile<f16, 64, 32>`).
template <class T, int... Dims> struct Tile {
  static_assert(is_dtype_v<T>, "kiln::Tile: element type must be one of i1, i8, i32, i64, f16, "
                               "bf16, f32, f64 or ptr<...>");
  static_assert(((Dims > 0) && ...), "kiln::Tile: every dimension must be positive");
  using dtype = T;
  static constexpr int rank = sizeof...(Dims);
  static constexpr std::array<int, sizeof...(Dims)> shape{Dims...};
  static constexpr long numel = (1L * ... * Dims);
  static std::span<const int> shape_span() { return detail::shape_span<T, Dims...>(); }

  detail::V v;
  explicit Tile(detail::V v) : v(v) {}
  /// Scalars can be made from C++ numbers: `F32 x = 1.0f;`.
  template <class S>
    requires(sizeof...(Dims) == 0 && detail::is_literal_v<S> && !is_ptr_v<T>)
  Tile(S s) : v(detail::literal<T>(s).v) {}
};

/// Scalar and pointer kernel-parameter types.
using I1 = Tile<i1>;
using I32 = Tile<i32>;
using I64 = Tile<i64>;
using F16 = Tile<f16>;
using BF16 = Tile<bf16>;
using F32 = Tile<f32>;
using F64 = Tile<f64>;
template <class E> using Ptr = Tile<ptr<E>>;

inline constexpr double inf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// Element-wise binary operators (with numpy broadcasting)
//===----------------------------------------------------------------------===//

namespace detail {
template <class A, class B> auto arith(BinOp op, A a, B b) {
  using Bc = Broadcast<A, B>;
  using T = typename A::dtype;
  static_assert(Bc::ok, "kiln: operand shapes are not broadcast-compatible (right-aligned, each "
                        "dimension must match or be 1); use expand_dims/broadcast_to");
  static_assert(std::is_same_v<T, typename B::dtype>,
                "kiln: operands have different dtypes; convert one with cast<T>()");
  static_assert(!is_ptr_v<T>, "kiln: this operator is not defined on pointers (only + offset)");
  using R = typename Bc::template tile<T>;
  return R(binary(op, to_shape<R>(a).v, to_shape<R>(b).v));
}

template <class A, class B> auto offset_ptr(A p, B off) {
  using Bc = Broadcast<A, B>;
  static_assert(Bc::ok, "kiln: pointer and offset shapes are not broadcast-compatible");
  static_assert(is_int_v<typename B::dtype> && !std::is_same_v<typename B::dtype, i1>,
                "kiln: pointers can only be offset by i8/i32/i64 tiles");
  using R = typename Bc::template tile<typename A::dtype>;
  using O = typename Bc::template tile<typename B::dtype>;
  return R(addptr(to_shape<R>(p).v, to_shape<O>(off).v));
}

template <class A, class B> auto cmp(CmpOp op, A a, B b) {
  using Bc = Broadcast<A, B>;
  static_assert(Bc::ok, "kiln: operand shapes are not broadcast-compatible");
  static_assert(std::is_same_v<typename A::dtype, typename B::dtype>,
                "kiln: comparing different dtypes; convert one with cast<T>()");
  static_assert(!is_ptr_v<typename A::dtype>, "kiln: pointers cannot be compared");
  using R = typename Bc::template tile<typename A::dtype>;
  return typename Bc::template tile<i1>(compare(op, to_shape<R>(a).v, to_shape<R>(b).v));
}

/// Turn a literal operand into a rank-0 tile of the other operand's dtype.
template <class Other, class X> auto lift(X x) {
  if constexpr (is_tile_v<X>)
    return x;
  else
    return literal<typename Other::dtype>(x);
}

template <class A, class B>
concept TileOperands = (is_tile_v<A> && (is_tile_v<B> || is_literal_v<B>)) ||
                       (is_literal_v<A> && is_tile_v<B>);

template <class A, class B> auto lhs(A a) {
  if constexpr (is_tile_v<A>) return a; else return lift<B>(a);
}
template <class A, class B> auto rhs(B b) {
  if constexpr (is_tile_v<B>) return b; else return lift<A>(b);
}
} // namespace detail

template <class A, class B> requires detail::TileOperands<A, B>
auto operator+(A a, B b) {
  if constexpr (detail::is_ptr_tile_v<A>)
    return detail::offset_ptr(a, detail::rhs<A, B>(b));
  else if constexpr (detail::is_ptr_tile_v<B>)
    return detail::offset_ptr(b, detail::lhs<A, B>(a));
  else
    return detail::arith(detail::BinOp::Add, detail::lhs<A, B>(a), detail::rhs<A, B>(b));
}

#define KILN_BINARY_OPERATOR(OP, KIND)                                                        \
  template <class A, class B> requires detail::TileOperands<A, B>                            \
  auto operator OP(A a, B b) {                                                                \
    return detail::arith(detail::BinOp::KIND, detail::lhs<A, B>(a), detail::rhs<A, B>(b));   \
  }
KILN_BINARY_OPERATOR(-, Sub)
KILN_BINARY_OPERATOR(*, Mul)
KILN_BINARY_OPERATOR(/, Div)
KILN_BINARY_OPERATOR(%, Rem)
KILN_BINARY_OPERATOR(&, And)
KILN_BINARY_OPERATOR(|, Or)
KILN_BINARY_OPERATOR(^, Xor)
#undef KILN_BINARY_OPERATOR

#define KILN_COMPARE_OPERATOR(OP, KIND)                                                       \
  template <class A, class B> requires detail::TileOperands<A, B>                            \
  auto operator OP(A a, B b) {                                                                \
    return detail::cmp(detail::CmpOp::KIND, detail::lhs<A, B>(a), detail::rhs<A, B>(b));     \
  }
KILN_COMPARE_OPERATOR(<, Lt)
KILN_COMPARE_OPERATOR(<=, Le)
KILN_COMPARE_OPERATOR(>, Gt)
KILN_COMPARE_OPERATOR(>=, Ge)
KILN_COMPARE_OPERATOR(==, Eq)
KILN_COMPARE_OPERATOR(!=, Ne)
#undef KILN_COMPARE_OPERATOR

template <class T, int... D> Tile<T, D...> operator-(Tile<T, D...> a) {
  static_assert(!is_ptr_v<T> && !std::is_same_v<T, i1>, "kiln: unary minus needs a number tile");
  return Tile<T, D...>(detail::unary(detail::UnOp::Neg, a.v));
}
template <int... D> Tile<i1, D...> operator!(Tile<i1, D...> a) {
  return Tile<i1, D...>(detail::unary(detail::UnOp::Not, a.v));
}

template <class A, class B> requires detail::TileOperands<A, B> auto maximum(A a, B b) {
  return detail::arith(detail::BinOp::Max, detail::lhs<A, B>(a), detail::rhs<A, B>(b));
}
template <class A, class B> requires detail::TileOperands<A, B> auto minimum(A a, B b) {
  return detail::arith(detail::BinOp::Min, detail::lhs<A, B>(a), detail::rhs<A, B>(b));
}

//===----------------------------------------------------------------------===//
// Math
//===----------------------------------------------------------------------===//

#define KILN_FLOAT_MATH(NAME, KIND)                                                           \
  template <class T, int... D> Tile<T, D...> NAME(Tile<T, D...> a) {                          \
    static_assert(is_float_v<T>, "kiln::" #NAME ": needs a floating-point tile");             \
    return Tile<T, D...>(detail::unary(detail::UnOp::KIND, a.v));                             \
  }
KILN_FLOAT_MATH(exp, Exp)
KILN_FLOAT_MATH(exp2, Exp2)
KILN_FLOAT_MATH(log, Log)
KILN_FLOAT_MATH(sqrt, Sqrt)
KILN_FLOAT_MATH(rsqrt, Rsqrt)
KILN_FLOAT_MATH(tanh, Tanh)
/// tanh where an approximation is enough (fastmath `afn`): on NVIDIA GPUs one
/// `tanh.approx.f32` for f32 (relative error below 2^-10.9, about the
/// rounding of f16), exact elsewhere.
KILN_FLOAT_MATH(tanh_approx, TanhApprox)
KILN_FLOAT_MATH(erf, Erf)
KILN_FLOAT_MATH(sin, Sin)
KILN_FLOAT_MATH(cos, Cos)
KILN_FLOAT_MATH(floor, Floor)
KILN_FLOAT_MATH(ceil, Ceil)
#undef KILN_FLOAT_MATH

template <class T, int... D> Tile<T, D...> abs(Tile<T, D...> a) {
  static_assert(!is_ptr_v<T>, "kiln::abs: needs a number tile");
  return Tile<T, D...>(detail::unary(detail::UnOp::Abs, a.v));
}

/// Element type conversion; the shape is unchanged.
template <class To, class T, int... D> Tile<To, D...> cast(Tile<T, D...> a) {
  static_assert(!is_ptr_v<To> && !is_ptr_v<T>, "kiln::cast: pointers cannot be cast");
  if constexpr (std::is_same_v<To, T>)
    return a;
  else
    return Tile<To, D...>(detail::cast(a.v, To::id));
}

/// `cond ? a : b` element-wise, broadcasting all three.
template <int... M, class A, class B>
  requires((detail::is_tile_v<A> || detail::is_tile_v<B>))
auto where(Tile<i1, M...> cond, A a, B b) {
  auto ta = detail::lhs<A, B>(a);
  auto tb = detail::rhs<A, B>(b);
  using AB = detail::Broadcast<decltype(ta), decltype(tb)>;
  static_assert(AB::ok, "kiln::where: value shapes are not broadcast-compatible");
  using T = typename decltype(ta)::dtype;
  static_assert(std::is_same_v<T, typename decltype(tb)::dtype>,
                "kiln::where: both values need the same dtype");
  using V = typename AB::template tile<T>;
  using All = detail::Broadcast<Tile<i1, M...>, V>;
  static_assert(All::ok, "kiln::where: mask shape is not broadcast-compatible with the values");
  using R = typename All::template tile<T>;
  using C = typename All::template tile<i1>;
  return R(detail::select(detail::to_shape<C>(cond).v, detail::to_shape<R>(ta).v,
                          detail::to_shape<R>(tb).v));
}

//===----------------------------------------------------------------------===//
// Construction and shape manipulation
//===----------------------------------------------------------------------===//

/// Index of this program along grid axis 0, 1 or 2.
inline I32 program_id(int axis) { return I32(detail::program_id(axis)); }
/// Number of programs along grid axis 0, 1 or 2.
inline I32 num_programs(int axis) { return I32(detail::num_programs(axis)); }

/// `[Start, End)` as an i32 tile; `arange<N>()` is `[0, N)`.
template <int Start, int End = -1> auto arange() {
  constexpr int lo = End < 0 ? 0 : Start;
  constexpr int hi = End < 0 ? Start : End;
  static_assert(hi > lo, "kiln::arange: the range must be non-empty");
  return Tile<i32, hi - lo>(detail::make_range(lo, hi));
}

template <class T, int... D, class S = double> Tile<T, D...> full(S value) {
  static_assert(detail::is_literal_v<S>, "kiln::full: value must be a number");
  return Tile<T, D...>(detail::constant(T::id, double(value), Tile<T, D...>::shape_span()));
}
template <class T, int... D> Tile<T, D...> zeros() { return full<T, D...>(0); }

/// Insert a unit dimension at `Axis`: (64) -> expand_dims<1> -> (64, 1).
template <int Axis, class T, int... D> auto expand_dims(Tile<T, D...> a) {
  static_assert(Axis >= 0 && Axis <= int(sizeof...(D)), "kiln::expand_dims: axis out of range");
  constexpr auto dims = detail::insert_axis(std::array<int, sizeof...(D)>{D...}, Axis);
  return detail::tile_of<T, dims>(detail::expand_dims(a.v, Axis));
}

template <int... To, class T, int... D> Tile<T, To...> broadcast_to(Tile<T, D...> a) {
  using Bc = detail::Broadcast<Tile<T, D...>, Tile<T, To...>>;
  static_assert(Bc::ok && std::is_same_v<typename Bc::template tile<T>, Tile<T, To...>>,
                "kiln::broadcast_to: source shape does not broadcast to the target shape");
  return detail::to_shape<Tile<T, To...>>(a);
}

template <int... To, class T, int... D> Tile<T, To...> reshape(Tile<T, D...> a) {
  static_assert(Tile<T, To...>::numel == Tile<T, D...>::numel,
                "kiln::reshape: element count must not change");
  return Tile<T, To...>(detail::reshape(a.v, Tile<T, To...>::shape_span()));
}

/// The transpose of a matrix: (A, B) -> (B, A). `dot(q, trans(k))` multiplies
/// by k^T without reordering k in memory.
template <class T, int... D> auto trans(Tile<T, D...> a) {
  static_assert(sizeof...(D) == 2, "kiln::trans: expects a 2-D tile");
  if constexpr (sizeof...(D) == 2) {
    constexpr std::array<int, 2> d{D...};
    return Tile<T, d[1], d[0]>(detail::trans(a.v));
  }
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Load the element behind every pointer.
template <class E, int... D> Tile<E, D...> load(Tile<ptr<E>, D...> p) {
  return Tile<E, D...>(detail::load(p.v, {}, {}));
}

/// Masked load: where `mask` is false nothing is read and the result holds `other`.
template <class E, int... D, int... M, class O = double>
Tile<E, D...> load(Tile<ptr<E>, D...> p, Tile<i1, M...> mask, O other = 0) {
  using P = Tile<ptr<E>, D...>;
  using Bc = detail::Broadcast<Tile<i1, M...>, P>;
  static_assert(Bc::ok && std::is_same_v<typename Bc::template tile<ptr<E>>, P>,
                "kiln::load: mask shape must broadcast to the pointer tile's shape");
  auto fill = detail::to_shape<Tile<E, D...>>(other);
  return Tile<E, D...>(
      detail::load(p.v, detail::to_shape<Tile<i1, D...>>(mask).v, fill.v));
}

/// Store `value` (broadcast to the pointer shape) behind every pointer.
template <class E, int... D, class X> void store(Tile<ptr<E>, D...> p, X value) {
  if constexpr (detail::is_tile_v<X>)
    static_assert(std::is_same_v<typename X::dtype, E>,
                  "kiln::store: value dtype differs from the pointee dtype; use cast<T>()");
  detail::store(p.v, detail::to_shape<Tile<E, D...>>(value).v, {});
}

/// Masked store: elements whose mask bit is false are not written.
template <class E, int... D, class X, int... M>
void store(Tile<ptr<E>, D...> p, X value, Tile<i1, M...> mask) {
  if constexpr (detail::is_tile_v<X>)
    static_assert(std::is_same_v<typename X::dtype, E>,
                  "kiln::store: value dtype differs from the pointee dtype; use cast<T>()");
  using P = Tile<ptr<E>, D...>;
  using Bc = detail::Broadcast<Tile<i1, M...>, P>;
  static_assert(Bc::ok && std::is_same_v<typename Bc::template tile<ptr<E>>, P>,
                "kiln::store: mask shape must broadcast to the pointer tile's shape");
  detail::store(p.v, detail::to_shape<Tile<E, D...>>(value).v,
                detail::to_shape<Tile<i1, D...>>(mask).v);
}

/// Brings the cache line behind each pointer (where `mask` holds) into the
/// GPU's L2 cache and goes on at once: a hint that changes no result (the
/// CPU backend drops it). One pointer a 128-byte line is enough. A kernel
/// uses it to start reading what a later kernel will read, such as the
/// next layer's weights during a decode step.
template <class E, int... D> void prefetch(Tile<ptr<E>, D...> p) { detail::prefetch(p.v, {}); }

/// Masked prefetch: only the lines of elements whose mask bit is true.
template <class E, int... D, int... M> void prefetch(Tile<ptr<E>, D...> p, Tile<i1, M...> mask) {
  using P = Tile<ptr<E>, D...>;
  using Bc = detail::Broadcast<Tile<i1, M...>, P>;
  static_assert(Bc::ok && std::is_same_v<typename Bc::template tile<ptr<E>>, P>,
                "kiln::prefetch: mask shape must broadcast to the pointer tile's shape");
  detail::prefetch(p.v, detail::to_shape<Tile<i1, D...>>(mask).v);
}

/// Adds each element of `value` (broadcast to the pointer shape) to the f32
/// behind its pointer, where `mask` holds, atomically: programs adding to
/// the same locations lose no addition (a split reduction's partial sums
/// meet this way). The additions are relaxed; a program reads the sums
/// after an atomic_add on a counter that every adding program increments
/// once it has added (the last one to count sees them all). Their order,
/// and so the rounding of the sums, may change from run to run.
template <int... D, class X> void atomic_accumulate(Tile<ptr<f32>, D...> p, X value) {
  if constexpr (detail::is_tile_v<X>)
    static_assert(std::is_same_v<typename X::dtype, f32>, "kiln::atomic_accumulate: adds f32 values");
  detail::atomic_accumulate(p.v, detail::to_shape<Tile<f32, D...>>(value).v, {});
}

/// Masked atomic_accumulate: elements whose mask bit is false add nothing.
template <int... D, class X, int... M>
void atomic_accumulate(Tile<ptr<f32>, D...> p, X value, Tile<i1, M...> mask) {
  if constexpr (detail::is_tile_v<X>)
    static_assert(std::is_same_v<typename X::dtype, f32>, "kiln::atomic_accumulate: adds f32 values");
  using P = Tile<ptr<f32>, D...>;
  using Bc = detail::Broadcast<Tile<i1, M...>, P>;
  static_assert(Bc::ok && std::is_same_v<typename Bc::template tile<ptr<f32>>, P>,
                "kiln::atomic_accumulate: mask shape must broadcast to the pointer tile's shape");
  detail::atomic_accumulate(p.v, detail::to_shape<Tile<f32, D...>>(value).v,
                            detail::to_shape<Tile<i1, D...>>(mask).v);
}

/// Adds `value` to the i32 at `p` once for the whole program and returns
/// the previous value. Acquire-release at GPU scope: the stores this program
/// made before are visible to any program that later adds to the same
/// counter, and the loads after it see the stores of the programs that added
/// before. With a counter per group of programs, the program that sees
/// `count - 1` is the last of its group and may combine their results (it
/// should also reset the counter for the next launch).
inline I32 atomic_add(Ptr<i32> p, I32 value) { return I32(detail::atomic_add(p.v, value.v)); }

/// Programmatic dependent launch (Hopper). A kernel that calls
/// `grid_dependency_wait()` is launched so that its programs may start
/// while the kernel before it on the stream still runs; the call blocks
/// until that kernel has completed and its stores are visible. Every
/// program must call it before it reads anything an earlier kernel writes
/// and before its first store; loads before it may read only what no kernel
/// writes (weights), and overlap the previous kernel's tail. Without a wait
/// a kernel is launched the ordinary way.
inline void grid_dependency_wait() { detail::grid_dependency_wait(); }
/// Lets the next kernel on the stream (if it waits with
/// `grid_dependency_wait()`) launch once every program of this one has
/// called this or exited; its wait still waits for this kernel to complete.
inline void launch_dependents() { detail::launch_dependents(); }

//===----------------------------------------------------------------------===//
// Matrix product and reductions
//===----------------------------------------------------------------------===//

/// How a product of f32 tiles may round its operands. `ieee`: computed in
/// f32. `tf32`: operands may be rounded to TF32 (10 mantissa bits, f32's
/// range) so that tensor cores compute the product (wgmma on sm_90a; about
/// 1e-4 relative error per product, like Triton's default for f32 dots);
/// where they cannot, it is computed in f32.
enum class InputPrecision { ieee, tf32 };

/// `a @ b + acc` with f32 accumulation; `a`: (M, K), `b`: (K, N), `acc`: (M, N).
/// `dot<InputPrecision::tf32>(a, b)` lets an f32 product run on tensor cores.
template <InputPrecision P = InputPrecision::ieee, class T, int M, int K, int K2, int N>
Tile<f32, M, N> dot(Tile<T, M, K> a, Tile<T, K2, N> b, Tile<f32, M, N> acc) {
  static_assert(K == K2, "kiln::dot: K of lhs (columns) != K of rhs (rows)");
  static_assert(std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, f32>,
                "kiln::dot: operands must be f16, bf16 or f32");
  static_assert(P == InputPrecision::ieee || std::is_same_v<T, f32>,
                "kiln::dot: InputPrecision::tf32 applies to f32 operands");
  return Tile<f32, M, N>(detail::dot(a.v, b.v, acc.v, P == InputPrecision::tf32));
}
template <InputPrecision P = InputPrecision::ieee, class T, int M, int K, int K2, int N>
Tile<f32, M, N> dot(Tile<T, M, K> a, Tile<T, K2, N> b) {
  return dot<P>(a, b, zeros<f32, M, N>());
}
template <class A, class B> auto dot(A, B) {
  static_assert(sizeof(A) == 0,
                "kiln::dot: operands must be 2-D tiles of one dtype (f16, bf16 or f32) "
                "with an f32 (M, N) accumulator");
}
template <class A, class B, class C> auto dot(A, B, C) {
  static_assert(sizeof(A) == 0,
                "kiln::dot: operands must be 2-D tiles of one dtype (f16, bf16 or f32) "
                "with an f32 (M, N) accumulator");
}

namespace detail {
template <int Axis, class T, int... D> auto reduced(RedOp op, Tile<T, D...> a) {
  static_assert(sizeof...(D) >= 1, "kiln: cannot reduce a scalar");
  static_assert(sizeof...(D) == 1 || Axis >= 0,
                "kiln: reducing a tile of rank > 1 needs the axis: sum<1>(x)");
  constexpr int axis = Axis < 0 ? 0 : Axis;
  static_assert(axis < int(sizeof...(D)), "kiln: reduction axis out of range");
  static_assert(!is_ptr_v<T>, "kiln: cannot reduce pointers");
  constexpr auto dims = drop_axis(std::array<int, sizeof...(D)>{D...}, axis);
  return tile_of<T, dims>(reduce(op, a.v, axis));
}
} // namespace detail

/// Sum along `Axis` (which may be omitted for 1-D tiles; the result is then a scalar).
template <int Axis = -1, class T, int... D> auto sum(Tile<T, D...> a) {
  return detail::reduced<Axis>(detail::RedOp::Sum, a);
}
template <int Axis = -1, class T, int... D> auto max(Tile<T, D...> a) {
  return detail::reduced<Axis>(detail::RedOp::Max, a);
}
template <int Axis = -1, class T, int... D> auto min(Tile<T, D...> a) {
  return detail::reduced<Axis>(detail::RedOp::Min, a);
}
/// Thread-block clusters. A kernel that calls `cluster_sum<SIZE>`,
/// `cluster_max<SIZE>`, `cluster_min<SIZE>` or `cluster_gather<SIZE>` runs
/// its programs in clusters of SIZE (2 to 8) consecutive program ids along
/// axis 0: launch it on a grid whose x is a multiple of SIZE. Each program
/// of a cluster gives a scalar and all of them get the same combination
/// (in rank order), so a row split over a cluster's programs reduces in one
/// exchange. Every program of a cluster must make the same calls in the
/// same order (not under a condition that differs between them). On the
/// GPU (sm_90 and newer) the values meet in the cluster's distributed
/// shared memory; on the CPU the cluster's programs run on threads of their
/// own.
namespace detail {
template <int SIZE> F32 cluster_combine(RedOp op, F32 v) {
  static_assert(SIZE >= 2 && SIZE <= 8, "kiln: a cluster holds 2 to 8 programs");
  return F32(cluster_reduce(op, v.v, SIZE));
}
template <int SIZE, class X> struct Gathered {
  static_assert(std::is_same_v<typename X::dtype, f32> && X::rank <= 1,
                "kiln::cluster_gather: gathers f32 scalars and 1-D f32 tiles");
};
template <int SIZE> struct Gathered<SIZE, F32> { using type = Tile<f32, SIZE>; };
template <int SIZE, int N> struct Gathered<SIZE, Tile<f32, N>> { using type = Tile<f32, SIZE, N>; };
} // namespace detail
template <int SIZE> F32 cluster_sum(F32 v) { return detail::cluster_combine<SIZE>(detail::RedOp::Sum, v); }
template <int SIZE> F32 cluster_max(F32 v) { return detail::cluster_combine<SIZE>(detail::RedOp::Max, v); }
template <int SIZE> F32 cluster_min(F32 v) { return detail::cluster_combine<SIZE>(detail::RedOp::Min, v); }
/// Every program of the cluster receives every program's values, in one
/// exchange: for each argument (an F32 or a Tile<f32, N>), a tile of SIZE
/// rows (Tile<f32, SIZE> or Tile<f32, SIZE, N>), row r holding the value of
/// the program of rank r (program_id(0) % SIZE). A merge that needs several
/// values of each program (a running max, sum and output) waits on the
/// cluster once:
///
///     auto [ms, accs] = cluster_gather<4>(m, acc);
template <int SIZE, class... Xs> auto cluster_gather(const Xs &...xs) {
  static_assert(SIZE >= 2 && SIZE <= 8, "kiln::cluster_gather: a cluster holds 2 to 8 programs");
  static_assert(sizeof...(Xs) >= 1, "kiln::cluster_gather: gathers at least one value");
  const std::array<detail::V, sizeof...(Xs)> in{xs.v...};
  std::vector<detail::V> out = detail::cluster_gather(in, SIZE);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple<typename detail::Gathered<SIZE, Xs>::type...>{
        typename detail::Gathered<SIZE, Xs>::type(out[I])...};
  }(std::index_sequence_for<Xs...>{});
}
/// Index (i32) of the first maximum along `Axis`.
template <int Axis = -1, class T, int... D> auto argmax(Tile<T, D...> a) {
  static_assert(sizeof...(D) == 1 || Axis >= 0, "kiln::argmax: give the axis for rank > 1");
  constexpr int axis = Axis < 0 ? 0 : Axis;
  static_assert(axis < int(sizeof...(D)), "kiln::argmax: axis out of range");
  constexpr auto dims = detail::drop_axis(std::array<int, sizeof...(D)>{D...}, axis);
  return detail::tile_of<i32, dims>(detail::argmax(a.v, axis));
}

/// Ceiling division of integers, a common grid helper.
template <class A, class B> requires detail::TileOperands<A, B> auto cdiv(A a, B b) {
  return (a + b - 1) / b;
}

} // namespace kiln
