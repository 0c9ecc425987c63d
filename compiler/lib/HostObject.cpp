//===- HostObject.cpp - LLVM dialect to an object file for the host CPU ---===//
#include "HostObject.h"

#include "kiln/core/error.hpp"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <mutex>

namespace kiln {

namespace {

void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// Defines `void _mlir_<name>(void **args)`, which loads every argument of
/// `name` through the pointer in args[i] and calls it: one entry point of
/// one type for every kernel, whatever its parameters (the convention of
/// MLIR's execution engine).
void addPackedEntry(llvm::Module &module, llvm::Function &kernel) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, /*isVarArg=*/false);
  auto *entry = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                       "_mlir_" + kernel.getName(), module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  llvm::Value *packed = entry->getArg(0);
  std::vector<llvm::Value *> args;
  for (llvm::Argument &arg : kernel.args()) {
    llvm::Value *slot = b.CreateGEP(b.getPtrTy(), packed, b.getInt64(arg.getArgNo()));
    args.push_back(b.CreateLoad(arg.getType(), b.CreateLoad(b.getPtrTy(), slot)));
  }
  b.CreateCall(&kernel, args);
  b.CreateRetVoid();
}

std::string describe(llvm::Error err) { return llvm::toString(std::move(err)); }

} // namespace

std::string emitHostObject(mlir::ModuleOp module, const std::string &name, int optLevel,
                           std::string &llvmIR) {
  initNativeTarget();
  auto fail = [&](const std::string &why) {
    return Error("kiln: compiling kernel '" + name + "' for the host failed: " + why);
  };
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, ctx, name);
  if (!llvmModule)
    throw fail("the LLVM dialect does not translate to LLVM IR");
  llvm::Function *kernel = llvmModule->getFunction(name);
  if (!kernel || kernel->isDeclaration())
    throw fail("no function '" + name + "' in the LLVM IR");

  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    throw fail(describe(builder.takeError()));
  builder->setCodeGenOptLevel(optLevel >= 2 ? llvm::CodeGenOptLevel::Default
                                            : llvm::CodeGenOptLevel::None);
  auto machine = builder->createTargetMachine();
  if (!machine)
    throw fail(describe(machine.takeError()));
  llvm::TargetMachine &tm = **machine;
  llvmModule->setDataLayout(tm.createDataLayout());
  llvmModule->setTargetTriple(tm.getTargetTriple());
  addPackedEntry(*llvmModule, *kernel);

  // The IR pipeline MLIR's execution engine runs (with no target cost
  // model); code generation below is for this host.
  auto optimize = mlir::makeOptimizingTransformer(unsigned(optLevel), /*sizeLevel=*/0,
                                                  /*targetMachine=*/nullptr);
  if (llvm::Error err = optimize(llvmModule.get()))
    throw fail(describe(std::move(err)));
  {
    llvm::raw_string_ostream os(llvmIR);
    llvmModule->print(os, nullptr);
  }

  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (tm.addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw fail("the host's target machine cannot emit object files");
  codegen.run(*llvmModule);
  return std::string(object.begin(), object.end());
}

} // namespace kiln
