//===- launch.hpp - how the kernels of a chain start ----------------------===//
#pragma once

#include "kiln/kiln.hpp"

namespace kiln::ops::detail {

/// The first thing a kernel of a chain does (the products, and every kernel
/// of a decode step): let the next kernel on the stream start launching,
/// then wait for the previous one to complete (programmatic dependent
/// launch). Each launch then overlaps the previous kernel's tail, which in
/// a decode step of short kernels is a good part of the step.
inline void wait_for_previous_kernel() {
  launch_dependents();
  grid_dependency_wait();
}

} // namespace kiln::ops::detail
