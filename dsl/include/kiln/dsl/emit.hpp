//===- emit.hpp - the tracing interface between the DSL and MLIR ----------===//
//
// The typed front end (tile.hpp) checks shapes and dtypes at C++ compile time
// and then calls these functions, which append kiln ops to the kernel being
// traced. Values are opaque handles so that user code never includes MLIR.
// The compiler implements them (compiler/lib/Emit.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/param.hpp"
#include "kiln/core/traced_module.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::detail {

/// An SSA value of the kernel being traced (an `mlir::Value` underneath).
struct V {
  void *impl = nullptr;
};

enum class BinOp { Add, Sub, Mul, Div, Rem, Max, Min, And, Or, Xor };
enum class CmpOp { Lt, Le, Gt, Ge, Eq, Ne };
enum class UnOp { Neg, Not, Exp, Exp2, Log, Sqrt, Rsqrt, Tanh, TanhApprox, Abs, Erf, Sin, Cos, Floor, Ceil };
enum class RedOp { Sum, Max, Min };

// Kernel lifetime. Tracing is per thread; one kernel at a time.
void begin_kernel(const std::string &name, std::span<const Param> params);
V param(int index);
TracedModulePtr end_kernel();
void abort_kernel() noexcept;
bool tracing() noexcept;

// Values.
V constant(DType t, double value, std::span<const int> shape);
V program_id(int axis);
V num_programs(int axis);
V make_range(int start, int end);
/// Broadcast `v` (scalar or tile) to `shape`, prepending unit dims as needed.
V broadcast_to(V v, std::span<const int> shape);
V expand_dims(V v, int axis);
V reshape(V v, std::span<const int> shape);
V trans(V v);
V binary(BinOp op, V a, V b);
V compare(CmpOp op, V a, V b);
V unary(UnOp op, V a);
V cast(V v, DType to);
V select(V cond, V a, V b);
V addptr(V ptr, V offset);
V load(V ptr, V mask, V other);
void store(V ptr, V value, V mask);
void prefetch(V ptr, V mask);
V atomic_add(V ptr, V value);
void atomic_accumulate(V ptr, V value, V mask);
void grid_dependency_wait();
void launch_dependents();
V dot(V a, V b, V acc, bool tf32 = false);
V reduce(RedOp op, V v, int axis);
V cluster_reduce(RedOp op, V v, int size);
std::vector<V> cluster_gather(std::span<const V> values, int size);
V argmax(V v, int axis);

// Loops: begin_for opens an scf.for and returns its induction variable and
// region arguments; end_for yields and returns the loop results.
struct LoopFrame {
  V iv;
  std::vector<V> args;
};
LoopFrame begin_for(V lo, V hi, V step, std::span<const V> init);
std::vector<V> end_for(std::span<const V> yields);

} // namespace kiln::detail
