//===- fuzz_kiln_opt.cpp - libFuzzer: parsing and verifying kiln IR -------===//
//
// What kiln-opt does first with any file: parse it with the kiln dialect and
// its dependencies loaded, and verify it. Diagnostics are expected; crashes,
// hangs and sanitizer reports are findings.
//
//===----------------------------------------------------------------------===//
#include "kiln/Lowering/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstdint>
#include <string>
#include <memory>

namespace {
std::unique_ptr<mlir::MLIRContext> context;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  context = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  context->allowUnregisteredDialects(false);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::ScopedDiagnosticHandler quiet(context.get(),
                                      [](mlir::Diagnostic &) { return mlir::success(); });
  // MLIR's lexer stops at the NUL that ends every buffer kiln-opt reads
  // (MemoryBuffer adds one); give it the same. Without it, it reads past
  // the fuzzer's bytes.
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(context.get(), /*verifyAfterParse=*/true);
  (void)mlir::parseSourceString<mlir::ModuleOp>(text, config);
  return 0;
}
