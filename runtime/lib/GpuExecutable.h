//===- GpuExecutable.h - a kernel as PTX, loaded on first launch ----------===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <memory>
#include <span>
#include <string>

namespace kiln {

class GpuExecutable {
public:
  GpuExecutable(std::string ptx, std::string name, int threads);
  ~GpuExecutable();
  /// Launches the kernel; false (nothing launched) when it copies with TMA
  /// and an argument's tensor cannot be described by a tensor map.
  [[nodiscard]] bool launch(const Grid &grid, std::span<const Param> params,
                            std::span<const KernelArg> args) const;
  /// Whether the kernel takes TMA tensor maps (encoded at each launch).
  bool uses_tma() const;

private:
  struct State;
  std::string ptx_, name_;
  int threads_;
  unsigned sharedBytes_; ///< dynamic shared memory per launch
  std::unique_ptr<State> state_;
};

} // namespace kiln
