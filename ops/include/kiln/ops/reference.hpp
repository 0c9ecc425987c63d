//===- reference.hpp - C++ references for the kernel library --------------===//
//
// Plain loops accumulating in double; the numeric tests compare kernels to these.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::ref {

template <class T> std::vector<double> vec_add(const std::vector<T> &x, const std::vector<T> &y) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = double(float(x[i])) + double(float(y[i]));
  return out;
}

template <class T> std::vector<double> softmax(const std::vector<T> &x, int rows, int cols) {
  std::vector<double> out(std::size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c)
      m = std::max(m, double(float(x[std::size_t(r) * cols + c])));
    for (int c = 0; c < cols; ++c)
      s += std::exp(double(float(x[std::size_t(r) * cols + c])) - m);
    for (int c = 0; c < cols; ++c)
      out[std::size_t(r) * cols + c] = std::exp(double(float(x[std::size_t(r) * cols + c])) - m) / s;
  }
  return out;
}

template <class T>
std::vector<double> layernorm(const std::vector<T> &x, const std::vector<T> &w,
                              const std::vector<T> &b, int rows, int n, double eps) {
  std::vector<double> out(std::size_t(rows) * n);
  for (int r = 0; r < rows; ++r) {
    const T *row = &x[std::size_t(r) * n];
    double mean = 0, var = 0;
    for (int c = 0; c < n; ++c)
      mean += double(float(row[c]));
    mean /= n;
    for (int c = 0; c < n; ++c)
      var += (double(float(row[c])) - mean) * (double(float(row[c])) - mean);
    var /= n;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < n; ++c)
      out[std::size_t(r) * n + c] =
          (double(float(row[c])) - mean) * rstd * double(float(w[c])) + double(float(b[c]));
  }
  return out;
}

inline double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/// A(M, K) @ B(K, N) (+ bias, then gelu when `bias` is given).
template <class T>
std::vector<double> matmul(const std::vector<T> &a, const std::vector<T> &b, int M, int N, int K,
                           const std::vector<T> *bias = nullptr) {
  std::vector<double> out(std::size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += double(float(a[std::size_t(m) * K + k])) * double(float(b[std::size_t(k) * N + n]));
      if (bias)
        acc = gelu_tanh(acc + double(float((*bias)[n])));
      out[std::size_t(m) * N + n] = acc;
    }
  return out;
}

} // namespace kiln::ref
