//===- CompiledKernel.cpp - compile or take from the cache, then load -----===//
#include "kiln/runtime/kernel.hpp"

#include "CpuExecutable.h"
#include "GpuExecutable.h"

#include "kiln/compiler/compiler.hpp"
#include "kiln/runtime/detail/kernel_cache.hpp"

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

namespace kiln {

namespace {
/// Whether a cache hit holds every stage a compilation records, so that
/// ir() answers for a cached kernel as for a compiled one.
bool complete(const KernelCache::Entry &hit, std::span<const Stage> stages) {
  for (Stage s : stages)
    if (!hit.stages.count(s))
      return false;
  return true;
}
} // namespace

struct CompiledKernel::Impl {
  std::string name;
  std::vector<Param> params;
  Target target;
  CompileOptions options;
  std::map<Stage, std::string> ir;
  double seconds = 0;
  bool fromCache = false;
  std::unique_ptr<CpuExecutable> cpu;
  std::unique_ptr<GpuExecutable> gpu;
  /// A kernel that copies with TMA keeps a copy of its source, compiled
  /// without TMA the first time a launch's tensors do not allow TMA.
  TracedModulePtr source;
  std::once_flag fallbackOnce;
  std::unique_ptr<GpuExecutable> fallback;

  /// The code of `traced` for `options`: from the cache, or compiled (and
  /// stored). Consumes the traced module when it compiles.
  struct Code {
    std::map<Stage, std::string> ir;
    std::string object;
    bool fromCache = false;
    std::string key; ///< its cache key (empty: not cached)
  };
  Code compileOrLoad(TracedModule &traced, const CompileOptions &options, bool lookup = true) {
    // The second compilation of the same kernel (in any process) is a cache
    // hit: for a GPU the PTX, for the host its machine code, for this CPU and
    // its features. Asked for the IR of every stage (printed or dumped),
    // compile rather than take a cached entry; the result is still stored.
    std::string key;
    bool cuda = target.kind == Target::Kind::Cuda;
    if (options.use_cache && KernelCache::enabled()) {
      key = cuda ? KernelCache::key({"kiln-kernel-v2", compiler::version(), target.str(),
                                     std::to_string(options.num_warps),
                                     std::to_string(options.num_stages), options.tma ? "tma" : "no-tma",
                                     options.persistent        ? "persistent"
                                     : options.warp_specialize ? "warp-specialized"
                                                               : "plain",
                                     options.cuda_path, compiler::print(traced)})
                 : KernelCache::key({"kiln-cpu-kernel-v1", compiler::version(), target.str(),
                                     compiler::host(), std::to_string(options.opt_level),
                                     compiler::print(traced)});
      lookup &= options.dump_dir.empty() && !options.print_after_all;
      // The entry is verified when loaded: a damaged one is a miss, and the
      // store below replaces it.
      if (auto hit = lookup ? KernelCache::load(key) : std::nullopt; hit) {
        if (complete(*hit, compiler::stages(target)) && (cuda || !hit->object.empty()))
          return {std::move(hit->stages), std::move(hit->object), true, key};
        // Intact but unusable (a stage missing, no object code for this
        // host); the store keeps an intact entry, so it goes first.
        KernelCache::discard(key);
      }
    }
    compiler::Output out = compiler::compile(traced, target, options);
    if (!key.empty())
      KernelCache::store(key, {out.ir, out.object});
    return {std::move(out.ir), std::move(out.object), false, key};
  }

  /// Makes the code of `ir` (PTX) or `object` (host) ready to launch.
  void load(const std::string &object) {
    if (target.kind == Target::Kind::Cuda)
      gpu = std::make_unique<GpuExecutable>(ir.at(Stage::Ptx), name, options.num_warps * 32);
    else
      cpu = std::make_unique<CpuExecutable>(object, name);
  }

  /// The kernel compiled without TMA (compiled on first use).
  const GpuExecutable &withoutTma() {
    std::call_once(fallbackOnce, [&] {
      CompileOptions plain = options;
      plain.tma = false;
      Code code = compileOrLoad(*source, plain);
      fallback = std::make_unique<GpuExecutable>(code.ir.at(Stage::Ptx), name, options.num_warps * 32);
      source.reset();
    });
    return *fallback;
  }
};

CompiledKernel::CompiledKernel(TracedModulePtr traced, const Target &target,
                               const CompileOptions &options)
    : impl_(std::make_unique<Impl>()) {
  if (!traced)
    throw Error("kiln: no traced kernel to compile");
  auto start = std::chrono::steady_clock::now();
  Impl &m = *impl_;
  m.name = compiler::name(*traced);
  auto params = compiler::params(*traced);
  m.params.assign(params.begin(), params.end());
  m.target = target;
  m.options = options;
  if (const char *env = std::getenv("KILN_PRINT_IR_AFTER_ALL"); env && *env && *env != '0')
    m.options.print_after_all = true;
  if (const char *env = std::getenv("KILN_DUMP_DIR"); env && *env)
    m.options.dump_dir = env;
  if (const char *env = std::getenv("KILN_CUDA_PATH"); env && *env)
    m.options.cuda_path = env;
  compiler::check(target, m.options);

  bool mayUseTma = target.kind == Target::Kind::Cuda && target.arch == "sm_90a" && m.options.tma;
  TracedModulePtr source = mayUseTma ? compiler::copy(*traced) : nullptr;
  Impl::Code code;
  try {
    code = m.compileOrLoad(*traced, m.options);
    m.ir = std::move(code.ir);
    m.load(code.object);
  } catch (const Error &) {
    if (!code.fromCache)
      throw;
    // A cached entry the driver or the JIT refuses: compile afresh.
    m.ir.clear();
    KernelCache::discard(code.key);
    code = m.compileOrLoad(*traced, m.options, /*lookup=*/false);
    m.ir = std::move(code.ir);
    m.load(code.object);
  }
  m.fromCache = code.fromCache;
  traced.reset(); // the MLIR context and module are not needed any more...
  if (m.gpu && m.gpu->uses_tma())
    m.source = std::move(source); // ...unless TMA may need a fallback
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CompiledKernel::~CompiledKernel() = default;
CompiledKernel::CompiledKernel(CompiledKernel &&) noexcept = default;
CompiledKernel &CompiledKernel::operator=(CompiledKernel &&) noexcept = default;

const std::string &CompiledKernel::name() const { return impl_->name; }
const Target &CompiledKernel::target() const { return impl_->target; }
std::span<const Param> CompiledKernel::params() const { return impl_->params; }
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
        throw Error(where() + "expects a pointer, got " +
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
  if (impl_->gpu) {
    if (!impl_->gpu->launch(grid, params, args) && !impl_->withoutTma().launch(grid, params, args))
      throw Error("kiln: kernel '" + name() + "' could not be launched without TMA");
  } else
    impl_->cpu->launch(grid, params, args);
}

} // namespace kiln
