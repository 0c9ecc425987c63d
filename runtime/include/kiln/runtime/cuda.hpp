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
void synchronize();

void *malloc_device(std::size_t bytes);
void free_device(void *p) noexcept;
void copy_to_device(void *dst, const void *src, std::size_t bytes);
void copy_to_host(void *dst, const void *src, std::size_t bytes);
void memset_device(void *dst, int byte, std::size_t bytes);

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

/// Times `fn` (which launches work) with CUDA events: median milliseconds of
/// `reps` runs. With `flush_l2`, a 256 MiB buffer is overwritten before every
/// run (outside the timed region) so that no run finds its data in L2.
double time_ms(const std::function<void()> &fn, int reps = 20, int warmup = 3,
               bool flush_l2 = false);

} // namespace kiln::cuda
