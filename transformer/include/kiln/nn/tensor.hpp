//===- tensor.hpp - the tensors kiln's blocks pass each other --------------===//
//
//   nn::Tensor<f16> x(target, {rows, 768});          // zeros, on the device
//   nn::Tensor<f16> h = x.like();                    // same shape and target
//   auto first = x.rows(0, 4);                       // a view of rows 0..3
//   std::vector<half> host = first.to_host();
//
// A tensor is a dense, row-major array of `D` (f32, f16, bf16, i32) on a
// target: device memory on a GPU, host memory on the CPU. The element type
// is part of the C++ type, so wiring an f16 activation into an f32 block does
// not compile; shapes are checked when a block is called (`expect`), with one
// message naming the block, the argument and both shapes. Views (`rows`,
// `reshape`) share their storage with the tensor they came from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/core/target.hpp"
#include "kiln/runtime/cuda.hpp"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::nn {

/// Dimensions, outermost first.
using Shape = std::vector<int64_t>;

/// "[2, 768]".
inline std::string to_string(const Shape &s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

template <class D> class Tensor {
public:
  using dtype = D;
  using host = typename D::host;

  Tensor() = default;
  /// Zeros of `shape` on `target`.
  Tensor(const Target &target, Shape shape) : Tensor(target, std::move(shape), true) {}
  /// `values` (numel of `shape` of them) copied to `target`.
  Tensor(const Target &target, Shape shape, std::span<const host> values)
      : Tensor(target, std::move(shape), false) {
    if (values.size() != std::size_t(numel()))
      throw Error("nn::Tensor: " + std::to_string(values.size()) + " values for shape " +
                  to_string(shape_));
    copy_from(values);
  }

  host *data() const { return data_; }
  const Shape &shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  /// Dimension `i`; negative counts from the last.
  int64_t dim(int i) const { return shape_.at(std::size_t(i < 0 ? rank() + i : i)); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape_)
      n *= d;
    return n;
  }
  bool empty() const { return !storage_; }
  bool on_gpu() const { return storage_ && storage_->gpu; }

  /// A tensor of the same shape on the same target (zeros).
  Tensor like() const {
    Tensor t;
    t.shape_ = shape_;
    t.storage_ = std::make_shared<Storage>(on_gpu(), std::size_t(numel()));
    t.data_ = t.storage_->base();
    return t;
  }

  /// Rows [first, first + n) of dimension 0, sharing this tensor's storage.
  Tensor rows(int64_t first, int64_t n) const {
    if (rank() < 1 || first < 0 || n < 0 || first + n > dim(0))
      throw Error("nn::Tensor: rows [" + std::to_string(first) + ", " + std::to_string(first + n) +
                  ") of a tensor of shape " + to_string(shape_));
    Tensor t = *this;
    t.shape_[0] = n;
    t.data_ = data_ + first * (numel() / std::max<int64_t>(dim(0), 1));
    return t;
  }

  /// The same elements as `shape` (of the same number of elements).
  Tensor reshape(Shape shape) const {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    if (t.numel() != numel())
      throw Error("nn::Tensor: cannot reshape " + to_string(shape_) + " to " + to_string(t.shape_));
    return t;
  }

  void copy_from(std::span<const host> values) {
    if (values.size() != std::size_t(numel()))
      throw Error("nn::Tensor: copying " + std::to_string(values.size()) +
                  " values into a tensor of shape " + to_string(shape_));
    if (values.empty())
      return;
    if (on_gpu())
      cuda::copy_to_device(data_, values.data(), values.size_bytes());
    else
      std::memcpy(data_, values.data(), values.size_bytes());
  }
  std::vector<host> to_host() const {
    std::vector<host> out(static_cast<std::size_t>(numel()));
    if (out.empty())
      return out;
    if (on_gpu())
      cuda::copy_to_host(out.data(), data_, out.size() * sizeof(host));
    else
      std::memcpy(out.data(), data_, out.size() * sizeof(host));
    return out;
  }

private:
  /// Storage for `shape`, zeroed when `zero` (else about to be overwritten).
  Tensor(const Target &target, Shape shape, bool zero) : shape_(std::move(shape)) {
    int64_t n = 1;
    for (int64_t d : shape_) {
      if (d < 0)
        throw Error("nn::Tensor: negative dimension in " + to_string(shape_));
      n *= d;
    }
    storage_ = std::make_shared<Storage>(target.kind == Target::Kind::Cuda, std::size_t(n), zero);
    data_ = storage_->base();
  }

  struct Storage {
    bool gpu;
    std::vector<host> hostData;
    std::unique_ptr<cuda::DeviceBuffer<host>> device;
    Storage(bool onGpu, std::size_t n, bool zero = true) : gpu(onGpu) {
      if (gpu) {
        device = std::make_unique<cuda::DeviceBuffer<host>>(std::max<std::size_t>(n, 1));
        if (zero)
          cuda::memset_device(device->data(), 0, std::max<std::size_t>(n, 1) * sizeof(host));
      } else {
        hostData.assign(n, host{});
      }
    }
    host *base() { return gpu ? device->data() : hostData.data(); }
  };
  std::shared_ptr<Storage> storage_;
  host *data_ = nullptr;
  Shape shape_;
};

/// A row-major [K, N] matrix as [N, K]: the decode copy of a weight
/// (`weight_t`) that blocks stream in decode steps.
template <class T> std::vector<T> transpose(std::span<const T> m, int64_t K, int64_t N) {
  if (int64_t(m.size()) != K * N)
    throw Error("nn::transpose: " + std::to_string(m.size()) + " values for a [" +
                std::to_string(K) + ", " + std::to_string(N) + "] matrix");
  std::vector<T> t(m.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      t[std::size_t(n * K + k)] = m[std::size_t(k * N + n)];
  return t;
}
template <class T> std::vector<T> transpose(const std::vector<T> &m, int64_t K, int64_t N) {
  return transpose(std::span<const T>(m), K, N);
}

/// A dimension `expect` does not check.
inline constexpr int64_t kAny = -1;

/// Throws unless `t` has `shape` (kAny matches any size), naming the block
/// and the argument: "nn::Linear(768 -> 2304): x has shape [5, 640];
/// expected [*, 768]".
template <class D>
void expect(const Tensor<D> &t, std::initializer_list<int64_t> shape, const std::string &block,
            const char *name) {
  bool ok = !t.empty() && t.rank() == int(shape.size());
  int i = 0;
  for (int64_t d : shape)
    ok = ok && (d == kAny || (i < t.rank() && t.dim(i) == d)), ++i;
  if (ok)
    return;
  std::string want = "[";
  i = 0;
  for (int64_t d : shape)
    want += (i++ ? ", " : "") + (d == kAny ? std::string("*") : std::to_string(d));
  throw Error(block + ": " + name + (t.empty() ? " is an empty tensor" : " has shape " + to_string(t.shape())) +
              "; expected " + want + "]");
}

} // namespace kiln::nn
