//===- KilnLayouts.cpp - GPU layout attributes: checks ---------------------===//
#include "kiln/Dialect/KilnDialect.h"

#include "llvm/Support/MathExtras.h"

#include <optional>

using namespace mlir;
using namespace kiln;

namespace {
using EmitError = function_ref<InFlightDiagnostic()>;

/// The element count of `shape`; none when it does not fit int64_t.
std::optional<int64_t> numel(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (llvm::MulOverflow(n, d, n))
      return std::nullopt;
  return n;
}

LogicalResult checkWarps(EmitError emitError, int64_t warps) {
  if (warps < 1 || warps > 32 || !llvm::isPowerOf2_64(uint64_t(warps)))
    return emitError() << "a layout's warps must be a power of two in [1, 32], got " << warps;
  return success();
}

/// M (rows) of a tile of `shape` that a slice along dimension 1 can hold:
/// (M) or (M, 1).
std::optional<int64_t> rowsOf(ArrayRef<int64_t> shape) {
  if (shape.size() == 1 || (shape.size() == 2 && shape[1] == 1))
    return shape[0];
  return std::nullopt;
}

/// N (columns) of a tile of `shape` that a slice along dimension 0 can hold:
/// (N) or (1, N).
std::optional<int64_t> colsOf(ArrayRef<int64_t> shape) {
  if (shape.size() == 1 || (shape.size() == 2 && shape[0] == 1))
    return shape.back();
  return std::nullopt;
}
} // namespace

//===----------------------------------------------------------------------===//
// #kiln.blocked
//===----------------------------------------------------------------------===//

LogicalResult BlockedLayoutAttr::verify(EmitError emitError, int64_t vec, int64_t warps) {
  if (vec < 1 || vec > 16 || !llvm::isPowerOf2_64(uint64_t(vec)))
    return emitError() << "#kiln.blocked: vec must be a power of two in [1, 16], got " << vec;
  return checkWarps(emitError, warps);
}

LogicalResult BlockedLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type, EmitError emitError) const {
  int64_t group = 32 * getWarps() * getVec();
  std::optional<int64_t> n = numel(shape);
  if (shape.empty() || !n || *n % group != 0 || shape.back() % getVec() != 0)
    return emitError() << "#kiln.blocked<vec = " << getVec() << ", warps = " << getWarps()
                       << "> needs a tile of a multiple of " << group
                       << " elements whose last dimension is a multiple of " << getVec();
  return success();
}

int64_t BlockedLayoutAttr::getNumWarps() const { return getWarps(); }

//===----------------------------------------------------------------------===//
// #kiln.replicated
//===----------------------------------------------------------------------===//

LogicalResult ReplicatedLayoutAttr::verify(EmitError emitError, int64_t warps) {
  return checkWarps(emitError, warps);
}

LogicalResult ReplicatedLayoutAttr::verifyEncoding(ArrayRef<int64_t>, Type, EmitError) const {
  return success();
}

int64_t ReplicatedLayoutAttr::getNumWarps() const { return getWarps(); }

//===----------------------------------------------------------------------===//
// #kiln.mma
//===----------------------------------------------------------------------===//

LogicalResult MmaLayoutAttr::verify(EmitError emitError, int64_t version, int64_t warpsM,
                                    int64_t warpsN) {
  if (version != 2 && version != 3)
    return emitError() << "#kiln.mma: version 2 (mma.sync m16n8k16) or 3 (wgmma), got " << version;
  if (warpsM < 1 || warpsN < 1)
    return emitError() << "#kiln.mma: warpsM and warpsN must be positive";
  if (version == 3 && (warpsM % 4 != 0 || warpsN != 1))
    return emitError() << "#kiln.mma<version = 3>: whole warpgroups on rows (warpsM a multiple of 4, "
                          "warpsN = 1), got warpsM = "
                       << warpsM << ", warpsN = " << warpsN;
  return checkWarps(emitError, warpsM * warpsN);
}

LogicalResult MmaLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elem, EmitError emitError) const {
  if (getVersion() == 3 && (shape.size() != 2 || shape[0] != 16 * getWarpsM() || shape[1] % 8 != 0 ||
                            shape[1] > 256))
    return emitError() << "#kiln.mma<version = 3, warpsM = " << getWarpsM()
                       << "> needs an (M, N) tile with M = " << 16 * getWarpsM()
                       << " (64 rows per warpgroup) and N a multiple of 8 up to 256";
  if (shape.size() != 2 || shape[0] % (16 * getWarpsM()) != 0 || shape[1] % (8 * getWarpsN()) != 0)
    return emitError() << "#kiln.mma<warpsM = " << getWarpsM() << ", warpsN = " << getWarpsN()
                       << "> needs an (M, N) tile with M a multiple of " << 16 * getWarpsM()
                       << " and N a multiple of " << 8 * getWarpsN();
  return success();
}

int64_t MmaLayoutAttr::getNumWarps() const { return getWarpsM() * getWarpsN(); }

//===----------------------------------------------------------------------===//
// #kiln.slice
//===----------------------------------------------------------------------===//

LogicalResult SliceLayoutAttr::verify(EmitError emitError, int64_t dim, Attribute parent) {
  if ((dim != 0 && dim != 1) || !isa_and_nonnull<MmaLayoutAttr>(parent))
    return emitError() << "#kiln.slice: only the rows (dim = 1) or columns (dim = 0) of a #kiln.mma "
                          "parent are supported";
  return success();
}

LogicalResult SliceLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type, EmitError emitError) const {
  auto mma = cast<MmaLayoutAttr>(getParent());
  if (getDim() == 0) {
    std::optional<int64_t> cols = colsOf(shape);
    if (!cols || *cols % (8 * mma.getWarpsN()) != 0)
      return emitError() << "#kiln.slice of the columns of " << getParent()
                         << " needs an (N) or (1, N) tile with N a multiple of " << 8 * mma.getWarpsN();
    return success();
  }
  std::optional<int64_t> rows = rowsOf(shape);
  if (!rows || *rows % (16 * mma.getWarpsM()) != 0)
    return emitError() << "#kiln.slice of the rows of " << getParent()
                       << " needs an (M) or (M, 1) tile with M a multiple of " << 16 * mma.getWarpsM();
  return success();
}

int64_t SliceLayoutAttr::getNumWarps() const { return cast<LayoutAttr>(getParent()).getNumWarps(); }

//===----------------------------------------------------------------------===//
// #kiln.dot_operand
//===----------------------------------------------------------------------===//

LogicalResult DotOperandLayoutAttr::verify(EmitError emitError, int64_t index, Attribute parent) {
  auto mma = dyn_cast_or_null<MmaLayoutAttr>(parent);
  if (!mma)
    return emitError() << "#kiln.dot_operand: the parent must be a #kiln.mma layout";
  if (index != 0 || mma.getWarpsN() != 1)
    return emitError() << "#kiln.dot_operand: only operand 0 (A) of a product whose warps hold "
                          "whole rows (warpsN = 1) is held in registers; B is read from shared memory";
  return success();
}

LogicalResult DotOperandLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elem,
                                                   EmitError emitError) const {
  if (!elem) // the element type did not parse; that was reported
    return failure();
  auto mma = cast<MmaLayoutAttr>(getParent());
  if (shape.size() != 2 || shape[0] % (16 * mma.getWarpsM()) != 0 || shape[1] % 16 != 0)
    return emitError() << "#kiln.dot_operand: an A operand (M, K) of " << getParent()
                       << " needs M a multiple of " << 16 * mma.getWarpsM() << " and K of 16";
  if (!elem.isF16() && !elem.isBF16())
    return emitError() << "#kiln.dot_operand: tensor-core operands are f16 or bf16, got " << elem;
  return success();
}

int64_t DotOperandLayoutAttr::getNumWarps() const { return cast<LayoutAttr>(getParent()).getNumWarps(); }

//===----------------------------------------------------------------------===//
// #kiln.shared
//===----------------------------------------------------------------------===//

LogicalResult SharedLayoutAttr::verify(EmitError emitError, bool, bool, int64_t warps) {
  return checkWarps(emitError, warps);
}

LogicalResult SharedLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elem,
                                               EmitError emitError) const {
  if (!elem) // the element type did not parse; that was reported
    return failure();
  if ((getSwizzle() || getTransposed()) && shape.size() != 2)
    return emitError() << "#kiln.shared: only 2-D tiles are swizzled or transposed";
  if (getSwizzle()) {
    // The stored tile's rows: the transpose's columns.
    int64_t cols = getTransposed() ? shape[0] : shape[1];
    if (!elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() != 16 || cols % 8 != 0 ||
        !llvm::isPowerOf2_64(uint64_t(cols / 8)))
      return emitError() << "#kiln.shared: swizzled tiles hold 16-bit elements in rows of a power "
                            "of two of 16-byte chunks";
  }
  return success();
}

int64_t SharedLayoutAttr::getNumWarps() const { return getWarps(); }
