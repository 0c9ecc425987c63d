//===- launch.hpp - how kernels start, and where their row sweeps start ---===//
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

/// `body` in a loop of one iteration or none: a branch on a value uniform
/// in a program.
template <class Cond, class Body> void when(Cond cond, Body body) {
  for_range(0, where(cond, I32(1), I32(0)), 1, [&](I32) { body(); });
}

/// The column, at or before 0, from which a sweep over a row of T that
/// starts `offset` elements into a 16-byte aligned buffer meets 16-byte
/// boundaries. Sweeping from there (columns below 0 masked off) reads and
/// writes whole 16-byte vectors whatever the row stride: rows of 50257
/// halves would otherwise all but one start off a boundary and be read two
/// bytes at a time.
template <class T> I32 aligned_first_column(I32 offset) {
  constexpr int kVec = 16 / int(sizeof(typename T::host));
  return -(offset % kVec);
}

} // namespace kiln::ops::detail
