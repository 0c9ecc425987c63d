//===- CpuPatterns.h - convert-kiln-to-cpu's patterns (internal) ----------===//
#ifndef KILN_LOWERING_CPUPATTERNS_H
#define KILN_LOWERING_CPUPATTERNS_H

#include "mlir/Transforms/DialectConversion.h"

namespace kiln {

/// Type conversion of the CPU lowering: pointers (and tiles of them) become i64.
class CpuTypeConverter : public mlir::TypeConverter {
public:
  explicit CpuTypeConverter(mlir::MLIRContext *ctx);
};

/// kiln.addptr / kiln.load / kiln.store.
void populateMemoryToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);
/// kiln.make_range / splat / broadcast / expand_dims / reshape.
void populateShapeToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);
/// kiln.dot / reduce / argmax / cast / select.
void populateComputeToCpuPatterns(CpuTypeConverter &converter, mlir::RewritePatternSet &patterns);

} // namespace kiln

#endif // KILN_LOWERING_CPUPATTERNS_H
