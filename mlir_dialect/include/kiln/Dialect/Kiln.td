//===- Kiln.td - everything of the kiln dialect ------------*- tablegen -*-===//
include "kiln/Dialect/KilnDialect.td"
include "kiln/Dialect/KilnTypes.td"
include "kiln/Dialect/KilnAttrs.td"
include "kiln/Dialect/KilnOps.td"
