//===- CpuExecutable.h - a kernel's host code, linked into this process ---===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llvm::orc {
class LLJIT;
}

namespace kiln {

/// The object file the compiler made of a kernel for the host CPU, linked
/// into this process with LLVM's ORC JIT. A launch runs every program of the
/// grid, spread over host threads.
class CpuExecutable {
public:
  /// Links `object` (see kiln::compiler::Output) of kernel `name`; throws
  /// Error when it does not link.
  CpuExecutable(const std::string &object, const std::string &name);
  ~CpuExecutable();
  void launch(const Grid &grid, std::span<const Param> params,
              std::span<const KernelArg> args) const;

private:
  /// Runs the programs of a kernel with kiln.cluster_reduce: each cluster's
  /// programs at once, on threads of their own.
  void launchClusters(const Grid &grid, std::vector<void *> &argPtrs) const;

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  void (*entry_)(void **) = nullptr;
  /// Programs of a cluster along x (kiln_cluster_size(); 1: no clusters).
  int clusterSize_ = 1;
};

} // namespace kiln
