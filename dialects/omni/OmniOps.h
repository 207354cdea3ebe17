//===- OmniOps.h - omni dialect operations ---------------------*- C++ -*-===//
//
// Declarations of every omni op (generated from OmniOps.td) and the
// interfaces they implement. Include this header to use the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNIOPS_H
#define OMNI_DIALECTS_OMNI_OMNIOPS_H

#include "dialects/omni/OmniDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/omni/OmniShardingRule.h"

#include "dialects/omni/OmniInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/omni/OmniOps.h.inc"

namespace mlir::omni {

/// Registers the omni dialect and the upstream dialects omni programs use
/// (func, scf, arith, tensor) with `registry`.
void registerOmniDialects(DialectRegistry &registry);

} // namespace mlir::omni

#endif // OMNI_DIALECTS_OMNI_OMNIOPS_H
