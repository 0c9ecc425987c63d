//===- cuda.hpp - the CUDA driver, loaded at run time ---------------------===//
//
// libcuda is opened with dlopen on first use, so every kiln binary starts on
// machines without a GPU or driver; only GPU calls then fail, with a message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <cstddef>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

/// True when the driver loads and reports at least one device.
bool available(std::string *why = nullptr);
/// Name and compute capability of device 0, e.g. "NVIDIA H200 (sm_90)".
std::string device_name();
/// "sm_80", "sm_90a", ... for device 0 (sm_90 reported as sm_90a).
std::string device_arch();
/// Streaming multiprocessors of device 0 (132 on an H200): the unit for
/// sizing grids of programs that loop over their work (ops::SoftmaxRows).
int multiprocessor_count();
void synchronize();

void *malloc_device(std::size_t bytes);
void free_device(void *p) noexcept;
void copy_to_device(void *dst, const void *src, std::size_t bytes);
void copy_to_host(void *dst, const void *src, std::size_t bytes);
void memset_device(void *dst, int byte, std::size_t bytes);
/// Bytes of device memory in use on the GPU (all processes, as the driver reports).
std::size_t memory_in_use();
/// Bytes of device memory free on the GPU, as the driver reports.
std::size_t memory_free();

/// Device memory holding `n` elements of T; `data()` is a device address usable
/// as a launch argument for a `Ptr<T>` parameter.
template <class T> class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t n) : n_(n), p_(static_cast<T *>(malloc_device(n * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T> &host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { free_device(p_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  T *data() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T> &host) { copy_to_device(p_, host.data(), host.size() * sizeof(T)); }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    copy_to_host(host.data(), p_, n_ * sizeof(T));
    return host;
  }

private:
  std::size_t n_;
  T *p_;
};

/// A CUDA stream. While a `StreamScope` for it is alive, kernel launches on
/// this thread go to it.
class Stream {
public:
  Stream();
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  void synchronize();
  void *handle() const { return s_; }

private:
  void *s_ = nullptr;
};

class StreamScope {
public:
  explicit StreamScope(Stream &s);
  ~StreamScope();

private:
  void *previous_;
};

/// The stream launches on this thread currently go to (null: the default stream).
void *current_stream();

/// A sequence of kernel launches captured once and replayed with one call:
/// what makes many small launches (a decode step) cheap.
class Graph {
public:
  /// Captures every launch `body` makes (on `stream`); nothing runs yet.
  static Graph capture(Stream &stream, const std::function<void()> &body);
  Graph(Graph &&o) noexcept : graph_(o.graph_), exec_(o.exec_), launches_(o.launches_) {
    o.graph_ = o.exec_ = nullptr;
  }
  ~Graph();
  void replay(Stream &stream) const;
  /// Kernel launches captured.
  int launches() const { return launches_; }

private:
  Graph() = default;
  void *graph_ = nullptr, *exec_ = nullptr;
  int launches_ = 0;
};

/// Events recorded one after another on the current stream: `elapsed_ms()`
/// gives the time between consecutive marks (a profile of the launches made
/// between them, without the cost of synchronising after each).
class Timeline {
public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline &) = delete;
  Timeline &operator=(const Timeline &) = delete;
  void mark();
  /// Waits for the last mark; element i is the time from mark i to mark i+1.
  /// Marks are then cleared (their events are reused).
  std::vector<double> elapsed_ms();

private:
  std::vector<void *> events_;
  std::size_t used_ = 0;
};

/// Times `fn` (which launches work) with CUDA events: median milliseconds of
/// `reps` runs. With `flush_l2`, a 256 MiB buffer is overwritten before every
/// run (outside the timed region) so that no run finds its data in L2.
double time_ms(const std::function<void()> &fn, int reps = 20, int warmup = 3,
               bool flush_l2 = false);

} // namespace kiln::cuda
