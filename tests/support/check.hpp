//===- check.hpp - comparing kernel output with a double reference --------===//
#pragma once

#include "kiln/core/dtype.hpp"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

/// Uniform values in [lo, hi) rounded to the storage type.
template <class T> std::vector<T> random_vector(std::size_t n, uint32_t seed, float lo = -1,
                                                float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<T> v(n);
  for (auto &x : v)
    x = T(dist(rng));
  return v;
}

struct Comparison {
  double max_abs_err = 0;
  std::size_t mismatches = 0;
  std::string report;
  bool ok() const { return mismatches == 0; }
};

/// |got - want| <= atol + rtol * |want| everywhere, where a NaN or an
/// infinity wanted must be got exactly (NaN matches any NaN); the first
/// mismatches and the max error are reported.
template <class T>
Comparison compare(const std::vector<T> &got, const std::vector<double> &want, double atol,
                   double rtol) {
  Comparison c;
  if (got.size() != want.size()) {
    c.mismatches = 1;
    c.report = "size mismatch";
    return c;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    double g = double(float(got[i]));
    if (!std::isfinite(want[i])) {
      bool same = std::isnan(want[i]) ? std::isnan(g) : g == want[i];
      if (!same && c.mismatches++ < 5) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "  [%zu] got %.7g want %.7g\n", i, g, want[i]);
        c.report += buf;
      }
      continue;
    }
    double err = std::fabs(g - want[i]);
    if (!(err <= c.max_abs_err))
      c.max_abs_err = std::isnan(err) ? INFINITY : std::max(c.max_abs_err, err);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {
      if (c.mismatches < 5) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "  [%zu] got %.7g want %.7g (err %.3g)\n", i, g, want[i], err);
        c.report += buf;
      }
      ++c.mismatches;
    }
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%zu mismatches of %zu, max abs err %.3g\n", c.mismatches,
                got.size(), c.max_abs_err);
  c.report = buf + c.report;
  return c;
}

} // namespace kiln::test
