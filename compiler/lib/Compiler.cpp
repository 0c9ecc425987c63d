//===- Compiler.cpp - run the pipelines, keep every stage's IR ------------===//
#include "kiln/compiler/compiler.hpp"

#include "HostObject.h"
#include "TracedModule.h"

#include "kiln/Lowering/Passes.h"
#include "kiln/core/error.hpp"

#include "mlir/Pass/PassManager.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

using namespace mlir;

namespace kiln {

void TracedModuleDeleter::operator()(TracedModule *m) const { delete m; }

namespace compiler {

namespace {

/// One compilation: runs pipelines on the kernel's module and records the
/// IR after each stage.
struct Driver {
  TracedModule &kernel;
  const CompileOptions &options;
  Output out;

  std::string print() { return compiler::print(kernel); }

  void record(Stage stage, std::string text) {
    if (!options.dump_dir.empty()) {
      std::filesystem::create_directories(options.dump_dir);
      std::string ext = stage == Stage::LLVMIR ? ".ll" : stage == Stage::Ptx ? ".ptx" : ".mlir";
      std::ofstream(std::filesystem::path(options.dump_dir) /
                    (kernel.name + "." + std::string(to_string(stage)) + ext))
          << text;
    }
    out.ir[stage] = std::move(text);
  }

  template <class Build> void run(const char *what, Build build) {
    MLIRContext *ctx = kernel.context.get();
    PassManager pm(ctx);
    build(pm);
    if (options.print_after_all)
      pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                          [](Pass *, Operation *) { return true; },
                          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
    DiagnosticCollector diags(ctx);
    if (failed(pm.run(*kernel.module)))
      throw Error("kiln: compiling kernel '" + kernel.name + "' failed in " + what + ":\n" +
                  diags.str());
  }
};

constexpr Stage kCudaStages[] = {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR,
                                 Stage::Ptx};
constexpr Stage kCpuStages[] = {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR};

} // namespace

const std::string &name(const TracedModule &kernel) { return kernel.name; }
std::span<const Param> params(const TracedModule &kernel) { return kernel.params; }

TracedModulePtr copy(const TracedModule &kernel) {
  if (!kernel.module)
    throw Error("kiln: kernel '" + kernel.name + "' was compiled already");
  TracedModulePtr out(new TracedModule);
  out->context = kernel.context;
  out->module = kernel.module.get().clone();
  out->name = kernel.name;
  out->params = kernel.params;
  return out;
}

std::string print(const TracedModule &kernel) {
  std::string s;
  llvm::raw_string_ostream os(s);
  ModuleOp module = kernel.module.get();
  module.print(os);
  return s;
}

const std::string &version() {
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

const std::string &host() {
  static const std::string description = [] {
    std::vector<std::string> features;
    for (auto &f : llvm::sys::getHostCPUFeatures())
      if (f.second)
        features.push_back(f.first().str());
    std::sort(features.begin(), features.end()); // the map's order is unspecified
    std::string s = llvm::sys::getProcessTriple() + "|" + llvm::sys::getHostCPUName().str();
    for (const std::string &f : features)
      s += "|" + f;
    return s;
  }();
  return description;
}

std::span<const Stage> stages(const Target &target) {
  if (target.kind == Target::Kind::Cuda)
    return kCudaStages;
  return kCpuStages;
}

void check(const Target &target, const CompileOptions &options) {
  if (target.kind != Target::Kind::Cuda)
    return;
  if (target.arch != "sm_80" && target.arch != "sm_86" && target.arch != "sm_89" &&
      target.arch != "sm_90" && target.arch != "sm_90a")
    throw Error("kiln: unsupported CUDA architecture '" + target.arch +
                "' (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)");
  if (options.num_warps < 1 || options.num_warps > 32)
    throw Error("kiln: num_warps must be in [1, 32], got " + std::to_string(options.num_warps));
  if (options.num_stages < 1 || options.num_stages > 8)
    throw Error("kiln: num_stages must be in [1, 8], got " + std::to_string(options.num_stages));
  if (options.persistent && !options.warp_specialize)
    throw Error("kiln: persistent kernels are warp-specialised (set warp_specialize too)");
}

Output compile(TracedModule &kernel, const Target &target, const CompileOptions &options) {
  check(target, options);
  if (!kernel.module)
    throw Error("kiln: kernel '" + kernel.name + "' was compiled already");
  Driver d{kernel, options, {}};
  d.run("kiln cleanup", buildKilnCleanupPipeline);
  d.record(Stage::Kiln, d.print());

  if (target.kind == Target::Kind::Cuda) {
    d.run("kiln to gpu", [&](OpPassManager &pm) {
      buildGpuKilnToGpuPipeline(pm, options.num_warps, options.num_stages, target.arch, options.tma,
                                options.warp_specialize, options.persistent);
    });
    d.record(Stage::Lowered, d.print());
    d.run("gpu to NVVM", buildGpuToNVVMPipeline);
    d.record(Stage::LLVMDialect, d.print());
    std::string ptx, llvmIR, error;
    {
      DiagnosticCollector diags(kernel.context.get());
      if (!translateToPtx(*kernel.module, target.arch, options.cuda_path, ptx, llvmIR, error))
        throw Error("kiln: compiling kernel '" + kernel.name + "' to PTX failed: " + error +
                    "\n" + diags.str());
    }
    d.record(Stage::LLVMIR, std::move(llvmIR));
    d.record(Stage::Ptx, std::move(ptx));
  } else {
    d.run("kiln to standard dialects", buildCpuKilnToStandardPipeline);
    d.record(Stage::Lowered, d.print());
    d.run("standard dialects to LLVM", buildCpuStandardToLLVMPipeline);
    d.record(Stage::LLVMDialect, d.print());
    std::string llvmIR;
    d.out.object = emitHostObject(*kernel.module, kernel.name, options.opt_level, llvmIR);
    d.record(Stage::LLVMIR, std::move(llvmIR));
  }
  // The module is lowered now: it cannot be compiled again.
  kernel.module = nullptr;
  return std::move(d.out);
}

} // namespace compiler
} // namespace kiln
