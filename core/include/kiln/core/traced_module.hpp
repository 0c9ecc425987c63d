//===- traced_module.hpp - the handle of a traced kernel ------------------===//
//
// Tracing (dsl/) produces a kernel that the compiler consumes; between them it
// is this opaque handle, so that neither user code nor the runtime's headers
// include MLIR. The compiler defines TracedModule (an MLIR context and module).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

namespace kiln {

class TracedModule;
/// Deletes a traced module (defined by the compiler, where TracedModule is complete).
struct TracedModuleDeleter {
  void operator()(TracedModule *m) const;
};
using TracedModulePtr = std::unique_ptr<TracedModule, TracedModuleDeleter>;

} // namespace kiln
