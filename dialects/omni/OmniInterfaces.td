//===- OmniInterfaces.td - omni op interfaces ---------------*- tablegen -*-===//
//
// Interfaces through which passes see omni ops without switching over op
// names: the VJP rule of a differentiable op (omni-autodiff).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_INTERFACES_TD
#define OMNI_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Omni_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::omni";
  let description = [{
    A differentiable op: given the adjoints (cotangents) of its results, it
    emits the ops computing the adjoints of its operands (the
    vector-Jacobian product). omni-autodiff calls it in reverse program
    order and sums the adjoints of values used more than once.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, the adjoints of the
        operands given `resultAdjoints` (one per result; a null value
        means the result does not reach the loss, i.e. a zero adjoint).
        Fills `operandAdjoints` with one value per operand, null where the
        operand gets no gradient (integer operands, indices, operands the
        op is constant in). The forward values are the op's own operands
        and results. Emits an error on the op and fails when the op cannot
        be differentiated as configured.
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
  ];
}

#endif // OMNI_INTERFACES_TD
