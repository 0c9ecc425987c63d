//===- KilnDialect.td - the kiln dialect -------------------*- tablegen -*-===//
#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Tile-level GPU kernel programming (Triton-style).";
  let description = [{
    The kiln dialect models one *program* of a grid of programs, as in Triton.
    Values are scalars or statically shaped tiles (`tensor<...>` of numbers or
    `!kiln.ptr`s); memory is reached through tiles of pointers with masked
    loads and stores. Block sizes are static (part of the tile types); problem
    sizes are runtime scalars passed as kernel arguments.

    A kernel is a `func.func` carrying the `kiln.kernel` unit attribute.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"];
  let extraClassDeclaration = [{
    /// Unit attribute marking a `func.func` as a kiln kernel.
    static constexpr ::llvm::StringLiteral getKernelAttrName() { return "kiln.kernel"; }
    /// Argument attribute of a `!kiln.tensormap` kernel argument: how the
    /// runtime encodes it (see -kiln-pipeline-loads).
    static constexpr ::llvm::StringLiteral getTensorMapAttrName() { return "kiln.tensormap"; }
    /// Integer attribute of a persistent kernel (see -kiln-warp-specialize):
    /// its arguments from this one on are the x, y, z extents of the grid it
    /// was launched for, which the runtime passes; the hardware grid holds
    /// the programs that fit on the GPU at once.
    static constexpr ::llvm::StringLiteral getVirtualGridAttrName() { return "kiln.virtual_grid"; }
  }];
}

// Every tile a kiln op takes or makes has a static, non-zero size in every
// dimension: the DSL cannot make an empty tile, and the lowerings divide
// work by tile extents.
def Kiln_NonEmptyTiles : NativeOpTrait<"NonEmptyTiles"> {
  let cppNamespace = "::kiln::trait";
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, !listconcat(traits, [Kiln_NonEmptyTiles])>;

#endif // KILN_DIALECT_TD
