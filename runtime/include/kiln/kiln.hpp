//===- kiln.hpp - everything a kiln user includes --------------------------===//
//
//   template <int BLOCK> struct VecAdd {
//     void operator()(Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n) const {
//       auto offs = program_id(0) * BLOCK + arange<BLOCK>();
//       auto mask = offs < n;
//       store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
//     }
//   };
//   auto k = kiln::compile<VecAdd<1024>>(kiln::Target::cpu());
//   k.launch(kiln::Grid(kiln::ceil_div(n, 1024)), x, y, out, n);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/dsl/trace.hpp"
#include "kiln/runtime/kernel.hpp"

namespace kiln {

namespace detail {
template <class P, class A> KernelArg make_arg(const A &a) {
  using T = typename P::dtype;
  if constexpr (is_ptr_v<T>) {
    using E = typename T::element;
    using H = typename E::host;
    if constexpr (std::is_same_v<A, std::nullptr_t>) {
      return KernelArg::pointer<H>(nullptr);
    } else {
      static_assert(std::is_pointer_v<A>,
                    "kiln::Kernel::launch: a Ptr<T> parameter needs a pointer argument");
      using Pointee = std::remove_cv_t<std::remove_pointer_t<A>>;
      static_assert(std::is_same_v<Pointee, H> || std::is_void_v<Pointee>,
                    "kiln::Kernel::launch: pointer argument's element type differs from the "
                    "kernel parameter's (f16 -> kiln::half, bf16 -> kiln::bfloat16, f32 -> float)");
      if constexpr (std::is_void_v<Pointee>)
        return KernelArg::untyped_pointer(a);
      else
        return KernelArg::pointer<H>(a);
    }
  } else if constexpr (is_float_v<T>) {
    static_assert(std::is_arithmetic_v<A>, "kiln::Kernel::launch: a float parameter needs a number");
    return KernelArg::floating(double(a), T::id);
  } else {
    static_assert(std::is_integral_v<A>,
                  "kiln::Kernel::launch: an integer parameter needs an integer argument");
    return KernelArg::integer(int64_t(a), T::id);
  }
}
} // namespace detail

/// A compiled kernel whose launch arguments are checked against the kernel's
/// C++ signature at compile time.
template <class K> class Kernel : public CompiledKernel {
  using Sig = detail::Signature<decltype(&K::operator())>;

public:
  using kernel_type = K;
  using CompiledKernel::CompiledKernel;
  using CompiledKernel::launch;
  /// `kernel` is the object that was traced (its configuration values).
  Kernel(TracedModulePtr traced, const Target &target, const CompileOptions &options, const K &kernel)
      : CompiledKernel(std::move(traced), target, options), object_(kernel) {}

  /// The kernel object this was traced from: its configuration (rows,
  /// widths, epilogue, ...) for the launch that needs it.
  const K &object() const { return object_; }

  template <class... A>
    requires(!(sizeof...(A) == 1 && (std::is_convertible_v<const A &, std::span<const KernelArg>> && ...)))
  void launch(const Grid &grid, const A &...args) const {
    static_assert(sizeof...(A) == Sig::arity,
                  "kiln::Kernel::launch: wrong number of arguments for this kernel");
    launch_impl(grid, std::make_index_sequence<sizeof...(A)>{}, args...);
  }

private:
  K object_{};
  template <std::size_t... I, class... A>
  void launch_impl(const Grid &grid, std::index_sequence<I...>, const A &...args) const {
    std::array<KernelArg, sizeof...(A)> erased{
        detail::make_arg<std::tuple_element_t<I, typename Sig::args>>(args)...};
    CompiledKernel::launch(grid, erased);
  }
};

/// Trace and compile kernel `K` (default-constructed, or `kernel`) for `target`.
template <class K>
Kernel<K> compile(const Target &target, const CompileOptions &options = {}, const K &kernel = K{}) {
  return Kernel<K>(trace(kernel), target, options, kernel);
}

inline uint32_t ceil_div(int64_t a, int64_t b) { return uint32_t((a + b - 1) / b); }

} // namespace kiln
