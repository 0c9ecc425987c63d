//===- CompiledKernel.cpp - run the pipelines, keep every stage's IR ------===//
#include "kiln/Lowering/Passes.h"
#include "kiln/runtime/detail/cpu_executable.hpp"
#include "kiln/runtime/detail/gpu_executable.hpp"
#include "kiln/runtime/detail/kernel_cache.hpp"

#include "llvm/Config/llvm-config.h"
#include "kiln/runtime/detail/traced_module.hpp"

#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/Module.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

using namespace mlir;

namespace kiln {

namespace {
/// Part of every cache key, so that a rebuilt compiler never reuses an older
/// one's output: kiln's and LLVM's versions plus the identity (size and
/// modification time) of the executable that embeds this compiler.
const std::string &compilerVersion() {
  static const std::string version = [] {
    std::string v = "kiln 0.1 / LLVM " LLVM_VERSION_STRING;
    std::error_code ec;
    auto exe = std::filesystem::canonical("/proc/self/exe", ec);
    if (!ec) {
      auto size = std::filesystem::file_size(exe, ec);
      auto time = std::filesystem::last_write_time(exe, ec).time_since_epoch().count();
      v += " / " + exe.string() + ":" + std::to_string(size) + ":" + std::to_string(time);
    }
    return v;
  }();
  return version;
}

/// Whether a cache hit holds every stage a compilation records, so that
/// ir() answers for a cached kernel as for a compiled one.
bool complete(const KernelCache::Entry &hit, std::initializer_list<Stage> stages) {
  for (Stage s : stages)
    if (!hit.stages.count(s))
      return false;
  return true;
}
} // namespace

struct CompiledKernel::Impl {
  TracedModulePtr traced;
  Target target;
  CompileOptions options;
  std::map<Stage, std::string> ir;
  double seconds = 0;
  bool fromCache = false;
  std::unique_ptr<CpuExecutable> cpu;
  std::unique_ptr<GpuExecutable> gpu;

  void record(Stage stage, std::string text) {
    if (!options.dump_dir.empty()) {
      std::filesystem::create_directories(options.dump_dir);
      std::string ext = stage == Stage::LLVMIR ? ".ll" : stage == Stage::Ptx ? ".ptx" : ".mlir";
      std::ofstream(std::filesystem::path(options.dump_dir) /
                    (traced->name + "." + std::string(to_string(stage)) + ext))
          << text;
    }
    ir[stage] = std::move(text);
  }

  std::string print() {
    std::string s;
    llvm::raw_string_ostream os(s);
    traced->module->print(os);
    return s;
  }

  template <class Build> void runStage(const char *what, Build build) {
    MLIRContext *ctx = traced->context.get();
    PassManager pm(ctx);
    build(pm);
    if (options.print_after_all)
      pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                          [](Pass *, Operation *) { return true; },
                          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
    DiagnosticCollector diags(ctx);
    if (failed(pm.run(*traced->module)))
      throw Error("kiln: compiling kernel '" + traced->name + "' failed in " + what + ":\n" +
                  diags.str());
  }
};

void TracedModuleDeleter::operator()(TracedModule *m) const { delete m; }

CompiledKernel::CompiledKernel(TracedModulePtr traced, const Target &target,
                               const CompileOptions &options)
    : impl_(std::make_unique<Impl>()) {
  if (!traced)
    throw Error("kiln: no traced kernel to compile");
  auto start = std::chrono::steady_clock::now();
  Impl &m = *impl_;
  m.traced = std::move(traced);
  m.target = target;
  m.options = options;
  if (const char *env = std::getenv("KILN_PRINT_IR_AFTER_ALL"); env && *env && *env != '0')
    m.options.print_after_all = true;
  if (const char *env = std::getenv("KILN_DUMP_DIR"); env && *env)
    m.options.dump_dir = env;

  if (const char *env = std::getenv("KILN_CUDA_PATH"); env && *env)
    m.options.cuda_path = env;

  // Asked for the IR of every stage (printed or dumped), compile rather
  // than take a cached entry; the result is still stored.
  bool lookup = m.options.dump_dir.empty() && !m.options.print_after_all;
  if (target.kind == Target::Kind::Cuda) {
    if (target.arch != "sm_80" && target.arch != "sm_86" && target.arch != "sm_89" &&
        target.arch != "sm_90" && target.arch != "sm_90a")
      throw Error("kiln: unsupported CUDA architecture '" + target.arch +
                  "' (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)");
    int warps = m.options.num_warps;
    if (warps < 1 || warps > 32)
      throw Error("kiln: num_warps must be in [1, 32], got " + std::to_string(warps));
    // The second compilation of the same kernel (in any process) is a cache hit.
    std::string key;
    if (m.options.use_cache && KernelCache::enabled()) {
      key = KernelCache::key({"kiln-kernel-v1", compilerVersion(), target.str(),
                              std::to_string(warps), std::to_string(m.options.num_stages),
                              m.options.cuda_path, m.print()});
      // load() verifies the entry: a damaged one is a miss, and the store
      // below replaces it.
      if (auto hit = lookup ? KernelCache::load(key) : std::nullopt; hit) {
        if (complete(*hit, {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR,
                            Stage::Ptx})) {
          m.ir = std::move(hit->stages);
          m.fromCache = true;
          m.gpu = std::make_unique<GpuExecutable>(m.ir[Stage::Ptx], m.traced->name, warps * 32);
          m.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          return;
        }
        // Intact but unusable; the store keeps an intact entry, so it goes first.
        KernelCache::discard(key);
      }
    }
    m.runStage("kiln cleanup", buildKilnCleanupPipeline);
    m.record(Stage::Kiln, m.print());
    int stages = m.options.num_stages;
    if (stages < 1 || stages > 8)
      throw Error("kiln: num_stages must be in [1, 8], got " + std::to_string(stages));
    m.runStage("kiln to gpu",
               [&](OpPassManager &pm) { buildGpuKilnToGpuPipeline(pm, warps, stages); });
    m.record(Stage::Lowered, m.print());
    m.runStage("gpu to NVVM", buildGpuToNVVMPipeline);
    m.record(Stage::LLVMDialect, m.print());
    std::string ptx, llvmIR, error;
    {
      DiagnosticCollector diags(m.traced->context.get());
      if (!translateToPtx(*m.traced->module, target.arch, m.options.cuda_path, ptx, llvmIR, error))
        throw Error("kiln: compiling kernel '" + m.traced->name + "' to PTX failed: " + error +
                    "\n" + diags.str());
    }
    m.record(Stage::LLVMIR, std::move(llvmIR));
    m.record(Stage::Ptx, ptx);
    if (!key.empty())
      KernelCache::store(key, {m.ir, ""});
    m.gpu = std::make_unique<GpuExecutable>(std::move(ptx), m.traced->name, warps * 32);
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return;
  }

  // The host's machine code is cached too, for this CPU and its features.
  std::string key;
  if (m.options.use_cache && KernelCache::enabled()) {
    key = KernelCache::key({"kiln-cpu-kernel-v1", compilerVersion(), target.str(),
                            CpuExecutable::host(), std::to_string(m.options.opt_level),
                            m.print()});
    // As for CUDA: load() verifies the entry, whose object code is linked
    // into this process.
    if (auto hit = lookup ? KernelCache::load(key) : std::nullopt; hit) {
      if (!hit->object.empty() &&
          complete(*hit, {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR})) {
        try {
          m.cpu = std::make_unique<CpuExecutable>(hit->object, m.traced->name);
          m.ir = std::move(hit->stages);
          m.fromCache = true;
          m.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          return;
        } catch (const Error &) {
        }
      }
      // Intact but unusable (no object code for this host, or one the JIT
      // refuses); the store keeps an intact entry, so it goes first.
      KernelCache::discard(key);
    }
  }
  m.runStage("kiln cleanup", buildKilnCleanupPipeline);
  m.record(Stage::Kiln, m.print());
  m.runStage("kiln to standard dialects", buildCpuKilnToStandardPipeline);
  m.record(Stage::Lowered, m.print());
  m.runStage("standard dialects to LLVM", buildCpuStandardToLLVMPipeline);
  m.record(Stage::LLVMDialect, m.print());

  std::string llvmIR, object;
  m.cpu = std::make_unique<CpuExecutable>(*m.traced->module, m.traced->name, m.options.opt_level,
                                          llvmIR, key.empty() ? nullptr : &object);
  m.record(Stage::LLVMIR, std::move(llvmIR));
  if (!key.empty() && !object.empty())
    KernelCache::store(key, {m.ir, object});
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CompiledKernel::~CompiledKernel() = default;
CompiledKernel::CompiledKernel(CompiledKernel &&) noexcept = default;
CompiledKernel &CompiledKernel::operator=(CompiledKernel &&) noexcept = default;

const std::string &CompiledKernel::name() const { return impl_->traced->name; }
const Target &CompiledKernel::target() const { return impl_->target; }
std::span<const Param> CompiledKernel::params() const { return impl_->traced->params; }
double CompiledKernel::compile_seconds() const { return impl_->seconds; }
bool CompiledKernel::from_cache() const { return impl_->fromCache; }

const std::string &CompiledKernel::ir(Stage stage) const {
  auto it = impl_->ir.find(stage);
  if (it == impl_->ir.end())
    throw Error("kiln: kernel '" + name() + "' has no '" + std::string(to_string(stage)) +
                "' stage for target " + impl_->target.str());
  return it->second;
}

namespace {
std::string signature(const std::string &name, std::span<const Param> params) {
  std::string s = name + "(";
  for (std::size_t i = 0; i < params.size(); ++i)
    s += (i ? ", " : "") + params[i].describe();
  return s + ")";
}
} // namespace

void CompiledKernel::launch(const Grid &grid, std::span<const KernelArg> args) const {
  auto params = this->params();
  // Messages are built only on failure: launching is a hot path.
  auto sigOf = [&] { return signature(name(), params); };
  if (args.size() != params.size())
    throw Error("kiln: kernel " + sigOf() + " takes " + std::to_string(params.size()) +
                " arguments, got " + std::to_string(args.size()));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Param &p = params[i];
    const KernelArg &a = args[i];
    auto where = [&] { return "kiln: argument " + std::to_string(i) + " of " + sigOf() + ": "; };
    if (p.is_pointer) {
      if (a.kind != KernelArg::Kind::Pointer)
        throw Error(where() + "expects a pointer, got a " +
                    (a.kind == KernelArg::Kind::Int ? "an integer" : "a float"));
      if (a.dtype != DType::Ptr && a.dtype != p.dtype)
        throw Error(where() + "expects a pointer to " + std::string(to_string(p.dtype)) +
                    ", got a pointer to " + std::string(to_string(a.dtype)));
      if (!a.ptr)
        throw Error(where() + "null pointer");
    } else if (is_float(p.dtype)) {
      if (a.kind != KernelArg::Kind::Float)
        throw Error(where() + "expects a " + std::string(to_string(p.dtype)) + " value, got " +
                    (a.kind == KernelArg::Kind::Pointer ? "a pointer" : "an integer"));
    } else {
      if (a.kind != KernelArg::Kind::Int)
        throw Error(where() + "expects an " + std::string(to_string(p.dtype)) + " value, got " +
                    (a.kind == KernelArg::Kind::Pointer ? "a pointer" : "a float"));
      if (p.dtype == DType::I32 && (a.i < INT32_MIN || a.i > INT32_MAX))
        throw Error(where() + "value " + std::to_string(a.i) + " does not fit in i32");
    }
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw Error("kiln: launch of " + name() + " with an empty grid (" + std::to_string(grid.x) +
                ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) + ")");
  if (impl_->gpu)
    impl_->gpu->launch(grid, params, args);
  else
    impl_->cpu->launch(grid, params, args);
}

} // namespace kiln
