//===- CpuExecutable.cpp - link a kernel's host code and launch it --------===//
#include "CpuExecutable.h"

#include "kiln/runtime/detail/thread_pool.hpp"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <thread>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

// Conversions LLVM may call for half precision on hosts without F16C.
extern "C" _Float16 kiln_truncsfhf2(float f) {
  uint16_t bits = kiln::half::from_float(f);
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return h;
}
extern "C" _Float16 kiln_truncdfhf2(double d) { return kiln_truncsfhf2(float(d)); }
extern "C" float kiln_extendhfsf2(_Float16 h) {
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return kiln::half::to_float(bits);
}

// Conversions LLVM calls for bfloat16 on hosts without AVX512-BF16 (the
// GCC 12 runtime does not define them).
extern "C" _Float16 kiln_truncsfbf2(float f) {
  uint16_t bits = kiln::bfloat16(f).bits;
  _Float16 h; // returned in the same register as a __bf16
  std::memcpy(&h, &bits, 2);
  return h;
}
extern "C" _Float16 kiln_truncdfbf2(double d) { return kiln_truncsfbf2(float(d)); }

// kiln.atomic_add on the CPU: programs run on several threads.
extern "C" int32_t kiln_atomic_add_i32(int64_t address, int32_t value) {
  return __atomic_fetch_add(reinterpret_cast<int32_t *>(address), value, __ATOMIC_SEQ_CST);
}

// kiln.atomic_accumulate on the CPU.
extern "C" void kiln_atomic_add_f32(int64_t address, float value) {
  std::atomic_ref<float>(*reinterpret_cast<float *>(address)).fetch_add(value, std::memory_order_relaxed);
}

// kiln.cluster_reduce and kiln.cluster_gather on the CPU: the programs of a
// cluster run on threads of their own, which meet at a barrier to exchange
// their values.
struct ClusterExchange {
  explicit ClusterExchange(int size) : size(size), meet(size) {}
  int size;
  std::barrier<> meet;
  float values[8] = {};
  std::vector<float> slots[8]; ///< each rank's gathered values
};
thread_local ClusterExchange *tlsCluster = nullptr;
thread_local int tlsRank = 0;
thread_local uint64_t tlsExchanges = 0;

extern "C" float kiln_cluster_reduce_f32(int32_t kind, float value) {
  ClusterExchange *c = tlsCluster;
  if (!c) // launched without clusters (not through CpuExecutable): a cluster of one
    return value;
  ++tlsExchanges;
  c->values[tlsRank] = value;
  c->meet.arrive_and_wait();
  // In rank order, as on the GPU; max and min propagate NaN like
  // arith.maximumf / arith.minimumf.
  float x = c->values[0];
  for (int r = 1; r < c->size; ++r) {
    float y = c->values[r];
    if (kind == 0)
      x = x + y;
    else if (std::isnan(x) || std::isnan(y))
      x = std::numeric_limits<float>::quiet_NaN();
    else
      x = kind == 1 ? std::max(x, y) : std::min(x, y);
  }
  c->meet.arrive_and_wait(); // everyone has read before anyone writes again
  return x;
}

// kiln.cluster_gather: begin (a rank sizes its own slots), put, sync, get,
// sync. Launched without clusters, the one program gathers from itself.
thread_local std::vector<float> tlsAlone;
std::vector<float> &ownSlots() { return tlsCluster ? tlsCluster->slots[tlsRank] : tlsAlone; }
extern "C" void kiln_cluster_gather_begin(int32_t n) {
  if (tlsCluster)
    ++tlsExchanges;
  ownSlots().resize(std::size_t(n));
}
extern "C" void kiln_cluster_put_f32(int32_t index, float value) { ownSlots()[std::size_t(index)] = value; }
extern "C" void kiln_cluster_gather_sync() {
  if (tlsCluster)
    tlsCluster->meet.arrive_and_wait();
}
extern "C" float kiln_cluster_get_f32(int32_t rank, int32_t index) {
  std::vector<float> &from = tlsCluster ? tlsCluster->slots[rank] : tlsAlone;
  return from[std::size_t(index)];
}

/// The host functions kernels may call, by name.
llvm::orc::SymbolMap runtimeSymbols(llvm::orc::MangleAndInterner &interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *sym, void *fn) {
    map[interner(sym)] = {llvm::orc::ExecutorAddr::fromPtr(fn), llvm::JITSymbolFlags::Exported};
  };
  add("__truncsfhf2", reinterpret_cast<void *>(&kiln_truncsfhf2));
  add("__truncdfhf2", reinterpret_cast<void *>(&kiln_truncdfhf2));
  add("__extendhfsf2", reinterpret_cast<void *>(&kiln_extendhfsf2));
  add("__truncsfbf2", reinterpret_cast<void *>(&kiln_truncsfbf2));
  add("__truncdfbf2", reinterpret_cast<void *>(&kiln_truncdfbf2));
  add("kiln_atomic_add_i32", reinterpret_cast<void *>(&kiln_atomic_add_i32));
  add("kiln_atomic_add_f32", reinterpret_cast<void *>(&kiln_atomic_add_f32));
  add("kiln_cluster_reduce_f32", reinterpret_cast<void *>(&kiln_cluster_reduce_f32));
  add("kiln_cluster_gather_begin", reinterpret_cast<void *>(&kiln_cluster_gather_begin));
  add("kiln_cluster_put_f32", reinterpret_cast<void *>(&kiln_cluster_put_f32));
  add("kiln_cluster_gather_sync", reinterpret_cast<void *>(&kiln_cluster_gather_sync));
  add("kiln_cluster_get_f32", reinterpret_cast<void *>(&kiln_cluster_get_f32));
  return map;
}

/// The packed entry point of kernel `name` (see kiln::compiler::Output).
std::string packedName(const std::string &name) { return "_mlir_" + name; }

void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// One argument's bytes, laid out as the kernel's parameter type.
union Slot {
  int64_t i64;
  int32_t i32;
  int8_t i8;
  bool i1;
  uint16_t bits16;
  float f32;
  double f64;
};

Slot toSlot(const kiln::Param &p, const kiln::KernelArg &a) {
  Slot s{};
  if (p.is_pointer) {
    s.i64 = int64_t(reinterpret_cast<uintptr_t>(a.ptr));
    return s;
  }
  switch (p.dtype) {
  case kiln::DType::I1: s.i1 = a.i != 0; break;
  case kiln::DType::I8: s.i8 = int8_t(a.i); break;
  case kiln::DType::I32: s.i32 = int32_t(a.i); break;
  case kiln::DType::I64: s.i64 = a.i; break;
  case kiln::DType::F16: s.bits16 = kiln::half(float(a.f)).bits; break;
  case kiln::DType::BF16: s.bits16 = kiln::bfloat16(float(a.f)).bits; break;
  case kiln::DType::F32: s.f32 = float(a.f); break;
  case kiln::DType::F64: s.f64 = a.f; break;
  case kiln::DType::Ptr: break;
  }
  return s;
}

} // namespace

namespace kiln {

CpuExecutable::CpuExecutable(const std::string &object, const std::string &name) {
  initNativeTarget();
  auto fail = [&](llvm::Error err) {
    return Error("kiln: loading the host code of '" + name + "' failed: " +
                 llvm::toString(std::move(err)));
  };
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit)
    throw fail(jit.takeError());
  jit_ = std::move(*jit);
  llvm::orc::JITDylib &lib = jit_->getMainJITDylib();
  // What the kernel's code may call: this process's symbols (libc, libm)
  // and kiln's own runtime functions.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit_->getDataLayout().getGlobalPrefix());
  if (!process)
    throw fail(process.takeError());
  lib.addGenerator(std::move(*process));
  llvm::orc::MangleAndInterner interner(jit_->getExecutionSession(), jit_->getDataLayout());
  if (llvm::Error err = lib.define(llvm::orc::absoluteSymbols(runtimeSymbols(interner))))
    throw fail(std::move(err));
  if (llvm::Error err = jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, name)))
    throw fail(std::move(err));
  auto entry = jit_->lookup(packedName(name));
  if (!entry)
    throw fail(entry.takeError());
  entry_ = entry->toPtr<void (*)(void **)>();
  if (auto size = jit_->lookup("kiln_cluster_size"))
    clusterSize_ = size->toPtr<int32_t (*)()>()();
  else
    llvm::consumeError(size.takeError());
}

CpuExecutable::~CpuExecutable() = default;

void CpuExecutable::launch(const Grid &grid, std::span<const Param> params,
                           std::span<const KernelArg> args) const {
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < params.size(); ++i)
    slots.push_back(toSlot(params[i], args[i]));
  if (clusterSize_ > 1) {
    std::vector<void *> argPtrs;
    for (Slot &s : slots)
      argPtrs.push_back(&s);
    return launchClusters(grid, argPtrs);
  }
  const uint64_t total = uint64_t(grid.x) * grid.y * grid.z;
  const unsigned workers = unsigned(std::min<uint64_t>(total, detail::pool_width()));

  auto work = [&](unsigned worker) {
    std::vector<Slot> own = slots; // the JIT'd code may read these concurrently; keep them private
    int32_t grid_args[6] = {0, 0, 0, int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)};
    std::vector<void *> packed;
    for (Slot &s : own)
      packed.push_back(&s);
    for (int32_t &g : grid_args)
      packed.push_back(&g);
    for (uint64_t p = worker; p < total; p += workers) {
      grid_args[0] = int32_t(p % grid.x);
      grid_args[1] = int32_t((p / grid.x) % grid.y);
      grid_args[2] = int32_t(p / (uint64_t(grid.x) * grid.y));
      entry_(packed.data());
    }
  };
  detail::parallel_for_each(workers, work);
}

void CpuExecutable::launchClusters(const Grid &grid, std::vector<void *> &argPtrs) const {
  const unsigned size = unsigned(clusterSize_);
  if (grid.x % size != 0)
    throw Error("kiln: kernel runs in clusters of " + std::to_string(size) +
                " programs along x; its grid's x (" + std::to_string(grid.x) + ") must be a multiple of " +
                std::to_string(size));
  const uint64_t clusters = uint64_t(grid.x / size) * grid.y * grid.z;
  const unsigned workers = unsigned(std::min<uint64_t>(clusters, detail::pool_width()));
  std::atomic<bool> uneven{false};
  // Each worker runs its clusters one after another, a thread per rank; the
  // threads of a rank leave the barrier when done, so that programs whose
  // exchanges do not pair up give an error instead of a hang.
  auto work = [&](unsigned worker) {
    ClusterExchange exchange{static_cast<int>(size)};
    std::vector<uint64_t> exchanges(size);
    auto rank = [&](unsigned r) {
      tlsCluster = &exchange;
      tlsRank = int(r);
      tlsExchanges = 0;
      std::vector<void *> packed = argPtrs;
      int32_t gridArgs[6] = {0, 0, 0, int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)};
      for (int32_t &g : gridArgs)
        packed.push_back(&g);
      const uint64_t perRow = grid.x / size;
      for (uint64_t c = worker; c < clusters; c += workers) {
        gridArgs[0] = int32_t((c % perRow) * size + r);
        gridArgs[1] = int32_t((c / perRow) % grid.y);
        gridArgs[2] = int32_t(c / (perRow * grid.y));
        entry_(packed.data());
      }
      exchanges[r] = tlsExchanges;
      tlsCluster = nullptr;
      exchange.meet.arrive_and_drop();
    };
    std::vector<std::thread> threads;
    for (unsigned r = 1; r < size; ++r)
      threads.emplace_back(rank, r);
    rank(0);
    for (std::thread &t : threads)
      t.join();
    if (std::adjacent_find(exchanges.begin(), exchanges.end(), std::not_equal_to<>()) != exchanges.end())
      uneven = true;
  };
  detail::parallel_for_each(workers, work);
  if (uneven)
    throw Error("kiln: the programs of a cluster made different numbers of cluster exchanges "
                "(every program of a cluster must reach each cluster_sum/max/min/gather)");
}

} // namespace kiln
