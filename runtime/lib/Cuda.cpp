//===- Cuda.cpp - CUDA driver entry points through dlopen -----------------===//
#include "kiln/runtime/cuda.hpp"
#include "GpuExecutable.h"

#include <algorithm>
#include <dlfcn.h>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <mutex>
#include <vector>

namespace kiln::cuda {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;
using CUdeviceptr = unsigned long long;

/// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig_st and
/// CUlaunchAttribute_st: an id padded to 8 bytes, then a 64-byte value).
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int flag;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute as cuda.h lays it out");
constexpr int kProgrammaticStreamSerialization = 6; ///< CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

struct Driver {
  void *lib = nullptr;
  std::string error;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
#define KILN_CU_FN(name, ...) CUresult (*name)(__VA_ARGS__) = nullptr;
  KILN_CU_FN(cuInit, unsigned)
  KILN_CU_FN(cuDeviceGetCount, int *)
  KILN_CU_FN(cuDeviceGet, CUdevice *, int)
  KILN_CU_FN(cuDeviceGetName, char *, int, CUdevice)
  KILN_CU_FN(cuDeviceGetAttribute, int *, int, CUdevice)
  KILN_CU_FN(cuDevicePrimaryCtxRetain, CUcontext *, CUdevice)
  KILN_CU_FN(cuCtxSetCurrent, CUcontext)
  KILN_CU_FN(cuCtxSynchronize)
  KILN_CU_FN(cuModuleLoadData, CUmodule *, const void *)
  KILN_CU_FN(cuModuleGetFunction, CUfunction *, CUmodule, const char *)
  KILN_CU_FN(cuFuncSetAttribute, CUfunction, int, int)
  KILN_CU_FN(cuOccupancyMaxActiveBlocksPerMultiprocessor, int *, CUfunction, int, size_t)
  KILN_CU_FN(cuLaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
             unsigned, unsigned, CUstream, void **, void **)
  KILN_CU_FN(cuMemAlloc_v2, CUdeviceptr *, size_t)
  KILN_CU_FN(cuMemFree_v2, CUdeviceptr)
  KILN_CU_FN(cuMemcpyHtoD_v2, CUdeviceptr, const void *, size_t)
  KILN_CU_FN(cuMemcpyDtoH_v2, void *, CUdeviceptr, size_t)
  KILN_CU_FN(cuMemsetD8_v2, CUdeviceptr, unsigned char, size_t)
  KILN_CU_FN(cuMemGetInfo_v2, size_t *, size_t *)
  KILN_CU_FN(cuGetErrorString, CUresult, const char **)
  KILN_CU_FN(cuEventCreate, CUevent *, unsigned)
  KILN_CU_FN(cuEventRecord, CUevent, CUstream)
  KILN_CU_FN(cuEventSynchronize, CUevent)
  KILN_CU_FN(cuEventElapsedTime, float *, CUevent, CUevent)
  KILN_CU_FN(cuEventDestroy_v2, CUevent)
  KILN_CU_FN(cuStreamCreate, CUstream *, unsigned)
  KILN_CU_FN(cuStreamDestroy_v2, CUstream)
  KILN_CU_FN(cuStreamSynchronize, CUstream)
  KILN_CU_FN(cuStreamBeginCapture_v2, CUstream, int)
  KILN_CU_FN(cuStreamEndCapture, CUstream, void **)
  KILN_CU_FN(cuGraphInstantiateWithFlags, void **, void *, unsigned long long)
  KILN_CU_FN(cuGraphLaunch, void *, CUstream)
  KILN_CU_FN(cuGraphExecDestroy, void *)
  KILN_CU_FN(cuGraphDestroy, void *)
  // CUDA 12+ (Hopper's TMA); null on older drivers, which then launch
  // kernels compiled without TMA.
  // Optional (dlsym'd alone): a kernel that waits on the previous one is
  // launched ordinarily without it.
  KILN_CU_FN(cuLaunchKernelEx, const CUlaunchConfig *, CUfunction, void **, void **)
  KILN_CU_FN(cuTensorMapEncodeTiled, void *, int, unsigned, void *, const unsigned long long *,
             const unsigned long long *, const unsigned *, const unsigned *, int, int, int, int)
#undef KILN_CU_FN

  Driver() {
    for (const char *name : {"libcuda.so.1", "libcuda.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      error = "the CUDA driver (libcuda.so.1) is not installed on this machine";
      return;
    }
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ok &= fn != nullptr;
    };
    sym(cuInit, "cuInit"); sym(cuDeviceGetCount, "cuDeviceGetCount");
    sym(cuDeviceGet, "cuDeviceGet"); sym(cuDeviceGetName, "cuDeviceGetName");
    sym(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    sym(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(cuCtxSetCurrent, "cuCtxSetCurrent"); sym(cuCtxSynchronize, "cuCtxSynchronize");
    sym(cuModuleLoadData, "cuModuleLoadData"); sym(cuModuleGetFunction, "cuModuleGetFunction");
    sym(cuFuncSetAttribute, "cuFuncSetAttribute");
    sym(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    sym(cuLaunchKernel, "cuLaunchKernel"); sym(cuMemAlloc_v2, "cuMemAlloc_v2");
    sym(cuMemFree_v2, "cuMemFree_v2"); sym(cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2");
    sym(cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2"); sym(cuMemsetD8_v2, "cuMemsetD8_v2");
    sym(cuMemGetInfo_v2, "cuMemGetInfo_v2");
    sym(cuGetErrorString, "cuGetErrorString"); sym(cuEventCreate, "cuEventCreate");
    sym(cuEventRecord, "cuEventRecord"); sym(cuEventSynchronize, "cuEventSynchronize");
    sym(cuEventElapsedTime, "cuEventElapsedTime"); sym(cuEventDestroy_v2, "cuEventDestroy_v2");
    sym(cuStreamCreate, "cuStreamCreate"); sym(cuStreamDestroy_v2, "cuStreamDestroy_v2");
    sym(cuStreamSynchronize, "cuStreamSynchronize");
    sym(cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2");
    sym(cuStreamEndCapture, "cuStreamEndCapture");
    sym(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    sym(cuGraphLaunch, "cuGraphLaunch"); sym(cuGraphExecDestroy, "cuGraphExecDestroy");
    sym(cuGraphDestroy, "cuGraphDestroy");
    if (!ok) {
      error = "the CUDA driver found is missing entry points kiln needs (too old?)";
      return;
    }
    cuTensorMapEncodeTiled = reinterpret_cast<decltype(cuTensorMapEncodeTiled)>(
        dlsym(lib, "cuTensorMapEncodeTiled"));
    cuLaunchKernelEx = reinterpret_cast<decltype(cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
    int count = 0;
    if (cuInit(0) != 0 || cuDeviceGetCount(&count) != 0 || count == 0) {
      error = "the CUDA driver reports no usable GPU";
      return;
    }
    if (cuDeviceGet(&dev, 0) != 0 || cuDevicePrimaryCtxRetain(&ctx, dev) != 0) {
      error = "could not create a CUDA context on device 0";
      return;
    }
  }
};

Driver &driver() {
  static Driver d;
  return d;
}

Driver &ready() {
  Driver &d = driver();
  if (!d.error.empty())
    throw Error("kiln: no GPU: " + d.error);
  d.cuCtxSetCurrent(d.ctx);
  return d;
}

void check(CUresult r, const char *what) {
  if (r == 0)
    return;
  const char *msg = nullptr;
  driver().cuGetErrorString(r, &msg);
  throw Error(std::string("kiln: CUDA error in ") + what + ": " + (msg ? msg : "unknown") +
              " (" + std::to_string(r) + ")");
}

} // namespace

bool available(std::string *why) {
  Driver &d = driver();
  if (why)
    *why = d.error;
  return d.error.empty();
}

std::string device_arch() {
  Driver &d = ready();
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, 75, d.dev), "cuDeviceGetAttribute"); // compute capability major
  check(d.cuDeviceGetAttribute(&minor, 76, d.dev), "cuDeviceGetAttribute");
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  return major == 9 && minor == 0 ? arch + "a" : arch;
}

int multiprocessor_count() {
  Driver &d = ready();
  int sms = 0;
  check(d.cuDeviceGetAttribute(&sms, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */, d.dev),
        "cuDeviceGetAttribute");
  return sms;
}

std::string device_name() {
  Driver &d = ready();
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof name, d.dev), "cuDeviceGetName");
  return std::string(name) + " (" + device_arch() + ")";
}

void synchronize() { check(ready().cuCtxSynchronize(), "cuCtxSynchronize"); }

void *malloc_device(std::size_t bytes) {
  CUdeviceptr p = 0;
  check(ready().cuMemAlloc_v2(&p, std::max<std::size_t>(bytes, 1)), "cuMemAlloc");
  return reinterpret_cast<void *>(p);
}
void free_device(void *p) noexcept {
  if (p && driver().error.empty())
    driver().cuMemFree_v2(reinterpret_cast<CUdeviceptr>(p));
}
void copy_to_device(void *dst, const void *src, std::size_t bytes) {
  check(ready().cuMemcpyHtoD_v2(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
}
void copy_to_host(void *dst, const void *src, std::size_t bytes) {
  check(ready().cuMemcpyDtoH_v2(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
}
std::size_t memory_in_use() {
  auto &d = ready();
  size_t free = 0, total = 0;
  check(d.cuMemGetInfo_v2(&free, &total), "cuMemGetInfo");
  return total - free;
}

std::size_t memory_free() {
  auto &d = ready();
  size_t free = 0, total = 0;
  check(d.cuMemGetInfo_v2(&free, &total), "cuMemGetInfo");
  return free;
}

void memset_device(void *dst, int byte, std::size_t bytes) {
  check(ready().cuMemsetD8_v2(reinterpret_cast<CUdeviceptr>(dst), (unsigned char)byte, bytes),
        "cuMemsetD8");
}

double time_ms(const std::function<void()> &fn, int reps, int warmup, bool flush_l2) {
  Driver &d = ready();
  static void *flush = nullptr;
  constexpr std::size_t kFlushBytes = 256u << 20;
  if (flush_l2 && !flush)
    flush = malloc_device(kFlushBytes);
  for (int i = 0; i < warmup; ++i)
    fn();
  CUevent start, stop;
  check(d.cuEventCreate(&start, 0), "cuEventCreate");
  check(d.cuEventCreate(&stop, 0), "cuEventCreate");
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    if (flush_l2)
      memset_device(flush, i & 0xff, kFlushBytes);
    check(d.cuEventRecord(start, current_stream()), "cuEventRecord");
    fn();
    check(d.cuEventRecord(stop, current_stream()), "cuEventRecord");
    check(d.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    times.push_back(ms);
  }
  d.cuEventDestroy_v2(start);
  d.cuEventDestroy_v2(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

namespace {
thread_local void *tls_stream = nullptr;
thread_local int tls_captured = 0;
} // namespace

void *current_stream() { return tls_stream; }

Stream::Stream() { check(ready().cuStreamCreate(&s_, 0), "cuStreamCreate"); }
Stream::~Stream() {
  if (s_ && driver().error.empty())
    driver().cuStreamDestroy_v2(s_);
}
void Stream::synchronize() { check(ready().cuStreamSynchronize(s_), "cuStreamSynchronize"); }

StreamScope::StreamScope(Stream &s) : previous_(tls_stream) { tls_stream = s.handle(); }
StreamScope::~StreamScope() { tls_stream = previous_; }

Timeline::~Timeline() {
  if (!driver().error.empty())
    return;
  for (void *e : events_)
    driver().cuEventDestroy_v2(static_cast<CUevent>(e));
}

void Timeline::mark() {
  Driver &d = ready();
  if (used_ == events_.size()) {
    CUevent e = nullptr;
    check(d.cuEventCreate(&e, 0), "cuEventCreate");
    events_.push_back(e);
  }
  check(d.cuEventRecord(static_cast<CUevent>(events_[used_++]), current_stream()),
        "cuEventRecord");
}

std::vector<double> Timeline::elapsed_ms() {
  Driver &d = ready();
  std::vector<double> out;
  if (used_ > 0)
    check(d.cuEventSynchronize(static_cast<CUevent>(events_[used_ - 1])), "cuEventSynchronize");
  for (std::size_t i = 0; i + 1 < used_; ++i) {
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, static_cast<CUevent>(events_[i]),
                               static_cast<CUevent>(events_[i + 1])),
          "cuEventElapsedTime");
    out.push_back(ms);
  }
  used_ = 0;
  return out;
}

Graph Graph::capture(Stream &stream, const std::function<void()> &body) {
  Driver &d = ready();
  Graph g;
  StreamScope scope(stream);
  check(d.cuStreamBeginCapture_v2(stream.handle(), /*CU_STREAM_CAPTURE_MODE_THREAD_LOCAL=*/1),
        "cuStreamBeginCapture");
  int before = tls_captured;
  try {
    body();
  } catch (...) {
    void *partial = nullptr;
    d.cuStreamEndCapture(stream.handle(), &partial);
    if (partial)
      d.cuGraphDestroy(partial);
    throw;
  }
  g.launches_ = tls_captured - before;
  check(d.cuStreamEndCapture(stream.handle(), &g.graph_), "cuStreamEndCapture");
  check(d.cuGraphInstantiateWithFlags(&g.exec_, g.graph_, 0), "cuGraphInstantiate");
  return g;
}

Graph::~Graph() {
  if (!driver().error.empty())
    return;
  if (exec_)
    driver().cuGraphExecDestroy(exec_);
  if (graph_)
    driver().cuGraphDestroy(graph_);
}

void Graph::replay(Stream &stream) const {
  check(ready().cuGraphLaunch(exec_, stream.handle()), "cuGraphLaunch");
}

void note_launch() { ++tls_captured; }

} // namespace kiln::cuda

namespace kiln {

/// A CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  uint64_t words[16];
};

/// How to encode one tensor-map parameter from the launch's arguments (the
/// table the lowering leaves in the global kiln_tensormaps).
struct TensorMapRecipe {
  int param, base, rows, cols, stride, boxRows, boxCols, dtype;
};

struct GpuExecutable::State {
  std::once_flag once;
  void *module = nullptr;
  void *function = nullptr;
  std::vector<TensorMapRecipe> maps;
  /// The last maps encoded, with what they were encoded from: a kernel is
  /// mostly launched on the same tensors, and encoding costs microseconds.
  struct Encoded {
    const void *base = nullptr;
    int64_t rows = 0, cols = 0, stride = 0;
    TensorMap map{};
  };
  std::mutex encodedMutex;
  std::vector<Encoded> encoded;
  /// A persistent kernel: the parameter receiving the launch's grid (x, y,
  /// z follow), and how many of its programs fit on the GPU at once.
  int virtualGrid = -1;
  unsigned resident = 0;
  /// The kernel waits on the grids before it (griddepcontrol.wait): it is
  /// launched as their programmatic dependent, unless
  /// KILN_DEPENDENT_LAUNCH=0 asks for ordinary launches.
  bool dependent = false;
  /// Programs a thread-block cluster holds along x (the kernel's
  /// .reqnctapercluster; 1: no clusters).
  int clusterSize = 1;
};

namespace {
/// An integer the lowering records as the initializer of global `name`
/// (absent: `otherwise`): the dynamic shared memory a kernel needs
/// (kiln_smem_bytes), the threads per CTA of a kernel with producer warps
/// (kiln_threads), the first grid parameter of a persistent kernel
/// (kiln_virtual_grid).
int recordedOr(const std::string &ptx, const std::string &name, int otherwise) {
  const std::string key = name + " = ";
  std::size_t at = ptx.find(key);
  return at == std::string::npos ? otherwise : int(std::stol(ptx.substr(at + key.size(), 16)));
}
/// The table of the global `kiln_tensormaps` (absent: no tensor maps): a
/// count, then eight numbers per map (see TensorMapRecipe).
std::vector<TensorMapRecipe> tensorMapsOf(const std::string &ptx) {
  std::size_t at = ptx.find("kiln_tensormaps[");
  if (at == std::string::npos)
    return {};
  auto malformed = [] { return Error("kiln: malformed kiln_tensormaps table in the kernel's PTX"); };
  // `.b8 kiln_tensormaps[4n] = {...}` (little-endian bytes) or `.b32 ...[n]`;
  // trailing zeros may be left out.
  std::size_t line = ptx.rfind('\n', at);
  std::string head = ptx.substr(line == std::string::npos ? 0 : line, at - (line == std::string::npos ? 0 : line));
  int width = head.find(".b8") != std::string::npos ? 1 : head.find(".b32") != std::string::npos ? 4 : 0;
  std::size_t open = ptx.find('{', at), close = ptx.find('}', at);
  if (!width || open == std::string::npos || close == std::string::npos || close < open)
    throw malformed();
  std::size_t count = std::stoul(ptx.substr(at + std::string("kiln_tensormaps[").size()));
  std::vector<int64_t> values;
  std::string body = ptx.substr(open + 1, close - open - 1);
  for (std::size_t i = 0; i < body.size();) {
    std::size_t used = 0;
    values.push_back(std::stoll(body.substr(i), &used));
    i += used;
    while (i < body.size() && (body[i] == ',' || body[i] == ' '))
      ++i;
  }
  if (values.size() > count || count % (4 / width) != 0)
    throw malformed();
  values.resize(count, 0);
  std::vector<int> numbers;
  for (std::size_t i = 0; i < count; i += 4 / width) {
    uint32_t word = 0;
    for (int byte = 0; byte < 4 / width; ++byte)
      word |= uint32_t(values[i + byte] & 0xff) << (8 * byte);
    numbers.push_back(width == 4 ? int(values[i]) : int(word));
  }
  if (numbers.empty() || numbers[0] < 0 || numbers.size() != std::size_t(1 + 8 * numbers[0]))
    throw malformed();
  std::vector<TensorMapRecipe> maps;
  for (int k = 0; k < numbers[0]; ++k) {
    const int *n = &numbers[1 + 8 * k];
    if (n[7] < 0 || n[7] > 2) // element type: f16, bf16, f32
      throw malformed();
    maps.push_back({n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]});
  }
  return maps;
}
constexpr int kMaxSharedPerBlockOptin = 97;    // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
} // namespace

GpuExecutable::GpuExecutable(std::string ptx, std::string name, int threads)
    : ptx_(std::move(ptx)), name_(std::move(name)), threads_(recordedOr(ptx_, "kiln_threads", threads)),
      sharedBytes_(unsigned(recordedOr(ptx_, "kiln_smem_bytes", 0))), state_(std::make_unique<State>()) {
  state_->maps = tensorMapsOf(ptx_);
  state_->virtualGrid = recordedOr(ptx_, "kiln_virtual_grid", -1);
  static const bool allowed = [] {
    const char *env = std::getenv("KILN_DEPENDENT_LAUNCH");
    return !(env && std::string(env) == "0");
  }();
  state_->dependent = allowed && recordedOr(ptx_, "kiln_dependent_launch", 0) == 1;
  state_->encoded.resize(state_->maps.size());
  state_->clusterSize = recordedOr(ptx_, "kiln_cluster_size", 1);
}

bool GpuExecutable::uses_tma() const { return !state_->maps.empty(); }
GpuExecutable::~GpuExecutable() = default;

bool GpuExecutable::launch(const Grid &grid, std::span<const Param> params,
                           std::span<const KernelArg> args) const {
  auto &d = cuda::ready();
  // Tensor maps, encoded from the arguments they describe; a tensor TMA
  // cannot describe (base or row stride not a multiple of 16 bytes, an
  // empty extent, no driver support) is the caller's to launch otherwise.
  std::vector<TensorMap> maps(state_->maps.size());
  if (!maps.empty()) {
    if (!d.cuTensorMapEncodeTiled)
      return false;
    std::lock_guard<std::mutex> lock(state_->encodedMutex);
    for (std::size_t k = 0; k < maps.size(); ++k) {
      const TensorMapRecipe &r = state_->maps[k];
      if (r.param != int(params.size() + k) || r.base >= int(args.size()) || r.rows >= int(args.size()) ||
          r.cols >= int(args.size()) || r.stride >= int(args.size()))
        throw Error("kiln: kernel '" + name_ + "' has a tensor map that does not match its parameters");
      const void *base = args[r.base].ptr;
      int64_t rows = args[r.rows].i, cols = args[r.cols].i, stride = args[r.stride].i;
      State::Encoded &e = state_->encoded[k];
      if (e.base == base && e.rows == rows && e.cols == cols && e.stride == stride) {
        maps[k] = e.map;
        continue;
      }
      const int64_t elemBytes = r.dtype == 2 ? 4 : 2;
      if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || rows <= 0 || cols <= 0 || stride < cols ||
          (stride * elemBytes) % 16 != 0)
        return false;
      unsigned long long dims[2] = {(unsigned long long)cols, (unsigned long long)rows};
      unsigned long long strides[1] = {(unsigned long long)(stride * elemBytes)};
      unsigned box[2] = {unsigned(r.boxCols), unsigned(r.boxRows)};
      unsigned elementStrides[2] = {1, 1};
      constexpr int kFloat16 = 6, kFloat32 = 7, kBFloat16 = 9, kInterleaveNone = 0, kSwizzle128B = 3,
                    kL2Promotion256B = 3, kOobFillZeros = 0;
      const int dtype = r.dtype == 2 ? kFloat32 : r.dtype == 1 ? kBFloat16 : kFloat16;
      TensorMap map{};
      if (d.cuTensorMapEncodeTiled(&map, dtype, 2, const_cast<void *>(base), dims,
                                   strides, box, elementStrides, kInterleaveNone, kSwizzle128B,
                                   kL2Promotion256B, kOobFillZeros) != 0)
        return false;
      e = {base, rows, cols, stride, map};
      maps[k] = map;
    }
  }
  std::call_once(state_->once, [&] {
    cuda::check(d.cuModuleLoadData(&state_->module, ptx_.c_str()), "cuModuleLoadData");
    void *function = nullptr;
    cuda::check(d.cuModuleGetFunction(&function, state_->module, name_.c_str()),
                "cuModuleGetFunction");
    if (sharedBytes_ > 48 * 1024) {
      int limit = 0;
      cuda::check(d.cuDeviceGetAttribute(&limit, kMaxSharedPerBlockOptin, d.dev), "cuDeviceGetAttribute");
      if (int(sharedBytes_) > limit)
        throw Error("kiln: kernel '" + name_ + "' needs " + std::to_string(sharedBytes_) +
                    " bytes of shared memory; this GPU allows " + std::to_string(limit) +
                    " per block (use smaller blocks or fewer stages)");
      cuda::check(d.cuFuncSetAttribute(function, kMaxDynamicSharedSizeBytes, int(sharedBytes_)),
                  "cuFuncSetAttribute");
    }
    if (state_->virtualGrid >= 0) {
      int perSm = 0, sms = cuda::multiprocessor_count();
      cuda::check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, function, threads_, sharedBytes_),
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor");
      if (perSm < 1)
        throw Error("kiln: kernel '" + name_ + "' cannot run on this GPU (no program fits on a multiprocessor)");
      state_->resident = unsigned(perSm * sms);
    }
    state_->function = function;
  });
  if (!state_->function)
    throw Error("kiln: kernel '" + name_ + "' failed to load on the GPU earlier");
  union Slot {
    uint64_t u64;
    int64_t i64;
    int32_t i32;
    int8_t i8;
    uint16_t bits16;
    float f32;
    double f64;
  };
  if (state_->clusterSize > 1 && grid.x % unsigned(state_->clusterSize) != 0)
    throw Error("kiln: kernel '" + name_ + "' runs in clusters of " + std::to_string(state_->clusterSize) +
                " programs along x; its grid's x (" + std::to_string(grid.x) + ") must be a multiple of " +
                std::to_string(state_->clusterSize));
  // A persistent kernel gets the grid it was launched for as arguments and
  // runs on as many programs as fit at once.
  bool persistent = state_->virtualGrid >= 0;
  if (persistent && state_->virtualGrid != int(params.size() + maps.size()))
    throw Error("kiln: kernel '" + name_ + "' has grid parameters that do not match its parameters");
  int32_t virtualGrid[3] = {int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)};
  unsigned programs = grid.x, programsY = grid.y, programsZ = grid.z;
  if (persistent) {
    uint64_t tiles = uint64_t(grid.x) * grid.y * grid.z;
    if (tiles > uint64_t(INT32_MAX))
      throw Error("kiln: kernel '" + name_ + "' launched with more than 2^31 programs");
    programs = unsigned(std::min<uint64_t>(tiles, state_->resident));
    programsY = programsZ = 1;
  }
  std::vector<Slot> slots(params.size());
  std::vector<void *> ptrs(params.size() + maps.size() + (persistent ? 3 : 0));
  for (std::size_t i = 0; i < params.size(); ++i) {
    Slot &s = slots[i];
    const KernelArg &a = args[i];
    if (params[i].is_pointer) {
      s.u64 = reinterpret_cast<uint64_t>(a.ptr);
    } else {
      switch (params[i].dtype) {
      case DType::I1:
      case DType::I8: s.i8 = int8_t(a.i); break;
      case DType::I32: s.i32 = int32_t(a.i); break;
      case DType::I64: s.i64 = a.i; break;
      case DType::F16: s.bits16 = half(float(a.f)).bits; break;
      case DType::BF16: s.bits16 = bfloat16(float(a.f)).bits; break;
      case DType::F32: s.f32 = float(a.f); break;
      case DType::F64: s.f64 = a.f; break;
      case DType::Ptr: break;
      }
    }
    ptrs[i] = &s;
  }
  for (std::size_t k = 0; k < maps.size(); ++k)
    ptrs[params.size() + k] = &maps[k];
  if (persistent)
    for (int k = 0; k < 3; ++k)
      ptrs[params.size() + maps.size() + k] = &virtualGrid[k];
  if (state_->dependent && d.cuLaunchKernelEx) {
    cuda::CUlaunchAttribute attr{};
    attr.id = cuda::kProgrammaticStreamSerialization;
    attr.value.flag = 1;
    cuda::CUlaunchConfig config{programs, programsY, programsZ, unsigned(threads_), 1, 1, sharedBytes_,
                          cuda::current_stream(), &attr, 1};
    cuda::check(d.cuLaunchKernelEx(&config, state_->function, ptrs.data(), nullptr), "cuLaunchKernelEx");
  } else {
    cuda::check(d.cuLaunchKernel(state_->function, programs, programsY, programsZ, unsigned(threads_), 1, 1,
                                 sharedBytes_, cuda::current_stream(), ptrs.data(), nullptr),
                "cuLaunchKernel");
  }
  cuda::note_launch();
  return true;
}

} // namespace kiln
