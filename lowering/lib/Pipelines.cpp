//===- Pipelines.cpp - kiln's pass pipelines and dialect registration -----===//
#include "kiln/Lowering/Passes.h"

#include "kiln/Dialect/KilnDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <string>

using namespace mlir;

namespace {
// Upstream passes are assembled from their textual names so that the
// pipeline reads the same here, in kiln-opt and in the docs.
constexpr const char *kCleanup = "canonicalize,cse,loop-invariant-code-motion,canonicalize";
constexpr const char *kCpuKilnToStandard =
    "kiln-cpu-grid-args,convert-kiln-to-cpu,canonicalize,cse";
constexpr const char *kCpuStandardToLLVM =
    "func.func(convert-elementwise-to-linalg),"
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops},"
    "buffer-deallocation-pipeline,"
    "convert-linalg-to-loops,"
    "func.func(arith-expand,arith-emulate-unsupported-floats{source-types=bf16,f16 "
    "target-type=f32}),"
    "math-extend-to-supported-types{target-type=f32},"
    "lower-affine,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
    "finalize-memref-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
    "convert-to-llvm,reconcile-unrealized-casts,canonicalize";

void ensureUpstreamPassesRegistered() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    kiln::registerKilnPasses();
  });
}

void addPipeline(OpPassManager &pm, const std::string &text) {
  ensureUpstreamPassesRegistered();
  std::string err;
  llvm::raw_string_ostream os(err);
  if (failed(parsePassPipeline(text, pm, os)))
    llvm::report_fatal_error(llvm::Twine("kiln: bad built-in pipeline: ") + err);
}
} // namespace

void kiln::buildKilnCleanupPipeline(OpPassManager &pm) { addPipeline(pm, kCleanup); }
void kiln::buildCpuKilnToStandardPipeline(OpPassManager &pm) {
  addPipeline(pm, kCpuKilnToStandard);
}
void kiln::buildCpuStandardToLLVMPipeline(OpPassManager &pm) {
  addPipeline(pm, kCpuStandardToLLVM);
}
void kiln::buildCpuPipeline(OpPassManager &pm) {
  buildKilnCleanupPipeline(pm);
  buildCpuKilnToStandardPipeline(pm);
  buildCpuStandardToLLVMPipeline(pm);
}

void kiln::buildGpuKilnToGpuPipeline(OpPassManager &pm, int numWarps, int numStages,
                                     const std::string &arch, bool tma, bool warpSpecialize,
                                     bool persistent) {
  // The per-thread code is large and flat; a bottom-up worklist canonicalizes
  // it ~50x faster than the default top-down one (attention: 0.06 s vs 5.7 s).
  std::string warps = std::to_string(numWarps);
  bool hopper = tma && arch == "sm_90a";
  std::string useTma = hopper ? " tma=true" : "";
  std::string specialize = !hopper || !warpSpecialize ? ""
                           : persistent                ? "kiln-warp-specialize{persistent=true},canonicalize,cse,"
                                                       : "kiln-warp-specialize,canonicalize,cse,";
  addPipeline(pm, "kiln-pipeline-loads{num-stages=" + std::to_string(numStages) + useTma + "},canonicalize,cse," +
              "kiln-coalesce{num-warps=" + warps + "},kiln-accelerate-matmul{arch=" + arch + "}," +
              "kiln-remove-layout-conversions," + (hopper ? "kiln-tma-stores," : "") +
              "canonicalize,cse,kiln-pipeline-mma," + specialize +
              "convert-kiln-to-gpu{num-warps=" + warps + " arch=" + arch + "},canonicalize{top-down=false},cse");
}

void kiln::buildGpuToNVVMPipeline(OpPassManager &pm) {
  addPipeline(pm, "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,convert-nvvm-to-llvm,"
          "canonicalize{top-down=false},cse,"
          "reconcile-unrealized-casts)");
}

void kiln::registerKilnPipelines() {
  static std::once_flag once;
  bool first = false;
  std::call_once(once, [&] { first = true; });
  ensureUpstreamPassesRegistered();
  if (!first)
    return;
  PassPipelineRegistration<>("kiln-cpu-pipeline",
                             "Lower traced kiln IR all the way to the LLVM dialect for the CPU",
                             [](OpPassManager &pm) { buildCpuPipeline(pm); });
  PassPipelineRegistration<>("kiln-cpu-to-standard",
                             "Lower kiln IR to tensor/linalg/scf/arith for the CPU",
                             [](OpPassManager &pm) {
                               buildKilnCleanupPipeline(pm);
                               buildCpuKilnToStandardPipeline(pm);
                             });
  PassPipelineRegistration<>("kiln-gpu-pipeline",
                             "Lower traced kiln IR to NVVM in a gpu.module (4 warps)",
                             [](OpPassManager &pm) {
                               buildKilnCleanupPipeline(pm);
                               buildGpuKilnToGpuPipeline(pm, 4);
                               buildGpuToNVVMPipeline(pm);
                             });
}

void kiln::registerKilnDialects(DialectRegistry &registry) {
  registry.insert<kiln::KilnDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
}
