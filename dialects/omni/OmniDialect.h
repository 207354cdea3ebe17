//===- OmniDialect.h - omni dialect, enums and attributes ------*- C++ -*-===//
//
// The omni dialect class, its enumerations and its attributes. Ops are in
// OmniOps.h; include that one to use the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNIDIALECT_H
#define OMNI_DIALECTS_OMNI_OMNIDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/omni/OmniEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/omni/OmniAttrs.h.inc"

#include "dialects/omni/OmniDialect.h.inc"

#endif // OMNI_DIALECTS_OMNI_OMNIDIALECT_H
