//===- kiln-opt.cpp - run kiln and upstream passes on textual IR ----------===//
#include "kiln/Lowering/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  kiln::registerKilnPipelines(); // also registers every kiln and upstream pass
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kiln optimizer driver\n", registry));
}
