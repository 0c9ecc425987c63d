//===- KilnTypes.td - kiln types and type constraints ------*- tablegen -*-===//
#ifndef KILN_TYPES_TD
#define KILN_TYPES_TD

include "kiln/Dialect/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"

def Kiln_PtrType : TypeDef<Kiln_Dialect, "Ptr"> {
  let mnemonic = "ptr";
  let summary = "pointer to global memory holding elements of one type";
  let description = [{
    A scalar pointer into global memory. Tiles of pointers are
    `tensor<...x!kiln.ptr<T>>`; `kiln.addptr` offsets them in elements of `T`.

    ```mlir
    !kiln.ptr<f16>
    tensor<128x!kiln.ptr<f32>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$pointeeType);
  let assemblyFormat = "`<` $pointeeType `>`";
  let genVerifyDecl = 1;
}

def Kiln_SharedType : TypeDef<Kiln_Dialect, "Shared"> {
  let mnemonic = "shared";
  let summary = "a ring of tiles in a program's shared memory";
  let description = [{
    `stages` buffers, each holding one tile of the given shape, in the shared
    memory of one program (a CTA). Produced by `-kiln-pipeline-loads` for
    GPU targets: asynchronous copies fill one buffer while the program
    computes on another. The GPU lowering chooses the in-memory layout
    (16-bit 2-D tiles are XOR-swizzled for conflict-free `ldmatrix`).

    ```mlir
    !kiln.shared<3x128x32xf16>   // 3 stages of a 128x32 f16 tile
    ```
  }];
  let parameters = (ins "int64_t":$stages,
                        ArrayRefParameter<"int64_t">:$shape,
                        "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The type of one buffer, as a tile.
    ::mlir::RankedTensorType getTileType() const {
      return ::mlir::RankedTensorType::get(getShape(), getElementType());
    }
  }];
}

def Kiln_TensorMapType : TypeDef<Kiln_Dialect, "TensorMap"> {
  let mnemonic = "tensormap";
  let summary = "a TMA tensor map describing a 2-D tensor in global memory";
  let description = [{
    The 128-byte descriptor (CUtensorMap) that Hopper's Tensor Memory
    Accelerator copies tiles with: base address, extents, row stride, box
    and swizzle. A kernel argument added by `-kiln-pipeline-loads{tma}`; the
    runtime encodes it on the host at every launch from the kernel's other
    arguments, as the argument's `kiln.tensormap` attribute describes, and
    passes it by value (`__grid_constant__`).

    ```mlir
    func.func @k(..., %map: !kiln.tensormap {kiln.tensormap = {...}})
    ```
  }];
}

// Element types a tile may hold.
def Kiln_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def Kiln_Int : AnyTypeOf<[I1, I8, I16, I32, I64]>;
def Kiln_Number : AnyTypeOf<[Kiln_Float, Kiln_Int]>;
def Kiln_Elem : AnyTypeOf<[Kiln_Number, Kiln_PtrType]>;

class Kiln_TileOf<list<Type> allowed>
    : RankedTensorOf<allowed, [HasStaticShapePred], "statically shaped tile">;

def Kiln_Tile : Kiln_TileOf<[Kiln_Elem]>;
def Kiln_NumberTile : Kiln_TileOf<[Kiln_Number]>;
def Kiln_FloatTile : Kiln_TileOf<[Kiln_Float]>;
def Kiln_I32Tile : Kiln_TileOf<[I32]>;
def Kiln_PtrTile : Kiln_TileOf<[Kiln_PtrType]>;
def Kiln_MaskTile : Kiln_TileOf<[I1]>;

def Kiln_Value : AnyTypeOf<[Kiln_Elem, Kiln_Tile]>;
def Kiln_NumberLike : AnyTypeOf<[Kiln_Number, Kiln_NumberTile]>;
def Kiln_PtrLike : AnyTypeOf<[Kiln_PtrType, Kiln_PtrTile]>;
def Kiln_IntLike : AnyTypeOf<[Kiln_Int, Kiln_TileOf<[Kiln_Int]>]>;
def Kiln_MaskLike : AnyTypeOf<[I1, Kiln_MaskTile]>;

#endif // KILN_TYPES_TD
