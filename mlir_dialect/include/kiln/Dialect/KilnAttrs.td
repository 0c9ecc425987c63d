//===- KilnAttrs.td - kiln attributes ----------------------*- tablegen -*-===//
#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "kiln/Dialect/KilnDialect.td"
include "mlir/IR/EnumAttr.td"
include "kiln/Dialect/KilnLayouts.td"

def Kiln_ReduceKind : I32EnumAttr<"ReduceKind", "combining function of a reduction", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Min", 2, "min">]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ReduceKindAttr : EnumAttr<Kiln_Dialect, Kiln_ReduceKind, "reduce_kind">;

#endif // KILN_ATTRS_TD
