//===- compiler.hpp - compiling a traced kernel for a target --------------===//
//
// The compiler's face, free of MLIR headers: it runs kiln's pass pipelines on
// a traced kernel and returns the IR of every stage and the code to run, PTX
// for a CUDA target or an object file for the host CPU. Loading that code,
// caching it and launching it is the runtime's part (kiln/runtime/kernel.hpp).
//
// The tracer behind kiln/dsl/emit.hpp is part of the compiler too: it builds
// the MLIR module a TracedModulePtr owns.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/param.hpp"
#include "kiln/core/target.hpp"
#include "kiln/core/traced_module.hpp"

#include <map>
#include <span>
#include <string>

namespace kiln::compiler {

/// What compiling one kernel for one target produces.
struct Output {
  /// The IR of every stage the target has (see stages()); for a CUDA target
  /// the Ptx stage is the code to load.
  std::map<Stage, std::string> ir;
  /// CPU targets: a relocatable object file for the host that defines
  /// `void _mlir_<name>(void **args)`, which takes pointers to the kernel's
  /// arguments followed by pointers to the six i32 grid values (program id
  /// x, y, z, then the grid's x, y, z). Empty for CUDA targets.
  std::string object;
};

/// The kernel's name and parameters, as traced.
const std::string &name(const TracedModule &kernel);
std::span<const Param> params(const TracedModule &kernel);
/// A copy of a kernel not compiled yet, to compile separately (with other
/// options); it shares the original's MLIR context, so copies are compiled
/// one at a time.
TracedModulePtr copy(const TracedModule &kernel);
/// The kernel's IR as traced: what a cache key hashes.
std::string print(const TracedModule &kernel);

/// kiln's and LLVM's versions plus the identity (path, size, modification
/// time) of the executable that embeds this compiler, so that a rebuilt
/// compiler never reuses an older one's output.
const std::string &version();
/// The host CPU and its features, for which CPU targets generate code.
const std::string &host();
/// The stages a compilation for `target` records, in order.
std::span<const Stage> stages(const Target &target);

/// Throws Error when `target` or `options` cannot be compiled for (an
/// unsupported CUDA architecture, num_warps or num_stages out of range).
void check(const Target &target, const CompileOptions &options);

/// Compiles `kernel` for `target`, which consumes its module: a traced
/// kernel is compiled once. Throws Error (with the MLIR diagnostics) when a
/// pipeline fails. Honours options.print_after_all and options.dump_dir.
Output compile(TracedModule &kernel, const Target &target, const CompileOptions &options);

} // namespace kiln::compiler
