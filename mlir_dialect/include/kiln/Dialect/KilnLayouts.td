//===- KilnLayouts.td - where a tile's elements live on a GPU -*- tablegen -*-===//
//
// GPU-stage tiles carry one of these attributes as their tensor encoding. It
// says which elements of the tile each thread of a CTA holds in registers
// (or, for `#kiln.shared`, how the tile is laid out in shared memory). The
// layout passes choose them; `kiln.convert_layout` moves a tile from one to
// another; convert-kiln-to-gpu reads them and decides nothing itself.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_LAYOUTS_TD
#define KILN_LAYOUTS_TD

include "kiln/Dialect/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/TensorEncoding.td"

def Kiln_LayoutAttrInterface : AttrInterface<"LayoutAttr"> {
  let cppNamespace = "::kiln";
  let description = [{
    A layout of a tile over the threads of a CTA (or in its shared memory).
  }];
  let methods = [
    InterfaceMethod<"The warps of the CTA the layout is for.", "int64_t", "getNumWarps">,
  ];
}

class Kiln_Layout<string name, string layoutMnemonic, list<Trait> traits = []>
    : AttrDef<Kiln_Dialect, name, !listconcat(traits, [
        DeclareAttrInterfaceMethods<Kiln_LayoutAttrInterface>,
        DeclareAttrInterfaceMethods<VerifiableTensorEncoding>])> {
  let mnemonic = layoutMnemonic;
  let genVerifyDecl = 1;
  let assemblyFormat = "`<` struct(params) `>`";
}

def Kiln_BlockedLayout : Kiln_Layout<"BlockedLayout", "blocked"> {
  let summary = "row-major groups of consecutive elements dealt out to the threads";
  let description = [{
    The tile's elements, in row-major order, are cut into groups of `vec`
    consecutive elements of one row; group `q` is held by thread
    `q mod (32 * warps)`. A thread therefore holds `numel / (32 * warps)`
    elements in `numel / (32 * warps * vec)` groups, and each group can be
    read or written with one vector access (16 bytes for 8 f16 elements).
    The element count must be a multiple of `32 * warps * vec` and the last
    dimension a multiple of `vec`.

    ```mlir
    tensor<64x64xf16, #kiln.blocked<vec = 8, warps = 4>>  // 8 groups of 8 per thread
    ```
  }];
  let parameters = (ins "int64_t":$vec, "int64_t":$warps);
}

def Kiln_ReplicatedLayout : Kiln_Layout<"ReplicatedLayout", "replicated"> {
  let summary = "every thread holds every element";
  let description = [{
    For tiles too small (or of an awkward size) to divide among the threads.
    Side effects are performed once, by thread 0's copy.

    ```mlir
    tensor<16xf32, #kiln.replicated<warps = 4>>
    ```
  }];
  let parameters = (ins "int64_t":$warps);
}

def Kiln_MmaLayout : Kiln_Layout<"MmaLayout", "mma"> {
  let summary = "the accumulator of warp-level tensor-core products";
  let description = [{
    `version = 2` is `mma.sync.m16n8k16` (sm_80+): an (M, N) tile is split
    over `warpsM x warpsN` warps, each owning an (M / warpsM, N / warpsN)
    region of 16x8 tiles; in each, lane `l` holds rows `l / 4` and `l / 4 + 8`
    at columns `2 * (l % 4)` and `2 * (l % 4) + 1`: four f32 per tile.
    M must be a multiple of `16 * warpsM` and N of `8 * warpsN`.

    `version = 3` is Hopper's warpgroup-level `wgmma.mma_async` (sm_90a),
    operands read from shared memory through matrix descriptors: each
    warpgroup of 4 consecutive warps computes 64 rows, so M is `16 * warpsM`
    and `warpsN` is 1, and a thread holds exactly the elements it holds in
    `version = 2` with the same warps (wgmma's accumulator fragment is that
    of 16x8 tiles along the warp's 16 rows). Everything that reads an
    accumulator (epilogues, row reductions, row slices) treats both alike.

    ```mlir
    tensor<64x64xf32, #kiln.mma<version = 2, warpsM = 2, warpsN = 2>>
    tensor<128x256xf32, #kiln.mma<version = 3, warpsM = 8, warpsN = 1>>
    ```
  }];
  let parameters = (ins "int64_t":$version, "int64_t":$warpsM, "int64_t":$warpsN);
  let extraClassDeclaration = [{
    /// 16x8 tiles per warp along M and N, for an (M, N) tile.
    int64_t getTilesM(int64_t M) const { return M / getWarpsM() / 16; }
    int64_t getTilesN(int64_t N) const { return N / getWarpsN() / 8; }
  }];
}

def Kiln_SliceLayout : Kiln_Layout<"SliceLayout", "slice"> {
  let summary = "a tile indexed like one dimension of a parent layout";
  let description = [{
    The elements of a tile of M elements along dimension 0 (shape `(M)` or
    `(M, 1)`) held as the rows of `parent` hold them: with `dim = 1` and an
    `#kiln.mma` parent, a thread holds the rows its accumulator elements lie
    in (2 per 16-row tile), which is what a reduction along the rows of an
    accumulator leaves and what broadcasting back along the rows needs:
    nothing moves either way. The four lanes of a quad (and the warps of a
    warp row) hold the same values.

    With `dim = 0`, a tile of N elements along its last dimension (`(N)` or
    `(1, N)`) is held as the columns of `parent`: a thread holds the columns
    its accumulator elements lie in (2 per 8-column tile), which is what a
    bias row added to an accumulator needs: each thread loads its own
    columns, nothing moves. The eight quads of a warp (and the warps of a
    warp column) hold the same values.

    ```mlir
    tensor<64xf32, #kiln.slice<dim = 1, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>>
    tensor<1x128xf32, #kiln.slice<dim = 0, parent = #kiln.mma<version = 3, warpsM = 8, warpsN = 1>>>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "::mlir::Attribute":$parent);
}

def Kiln_DotOperandLayout : Kiln_Layout<"DotOperandLayout", "dot_operand"> {
  let summary = "an operand of a tensor-core product, held in registers";
  let description = [{
    Operand `index` (0: A, 1: B) of a `kiln.dot` whose result has layout
    `parent`, in the registers each lane feeds to the tensor cores. An
    accumulator whose warps hold whole rows (`warpsN = 1`) is already in the A
    layout of a product with the same row split: attention's probabilities
    times V take P from registers this way.

    ```mlir
    tensor<64x64xf16, #kiln.dot_operand<index = 0, parent = #kiln.mma<version = 2, warpsM = 4, warpsN = 1>>>
    ```
  }];
  let parameters = (ins "int64_t":$index, "::mlir::Attribute":$parent);
}

def Kiln_SharedLayout : Kiln_Layout<"SharedLayout", "shared"> {
  let summary = "a tile in shared memory";
  let description = [{
    The tile is in shared memory (a buffer of a `kiln.local_alloc` ring), row
    major. With `swizzle`, the 16-byte chunks of row `r` are XOR-permuted by
    `r mod min(8, chunks per row)`, so that the eight rows an `ldmatrix`
    reads fall in different banks (16-bit tiles whose rows hold a power of
    two of chunks). With `transposed`, element (i, j) of this tile is element
    (j, i) of the stored one: `kiln.trans` of a tile in shared memory moves
    nothing. Tensor-core products read their operands from here.

    ```mlir
    tensor<64x32xf16, #kiln.shared<swizzle = true, transposed = false, warps = 4>>
    ```
  }];
  let parameters = (ins "bool":$swizzle, "bool":$transposed, "int64_t":$warps);
}

#endif // KILN_LAYOUTS_TD
