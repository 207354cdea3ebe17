//===- OmniInterfaces.td - omni op interfaces ---------------*- tablegen -*-===//
//
// Interfaces through which passes see omni ops without switching over op
// names: the VJP rule of a differentiable op (omni-autodiff) and the fusion
// kind of an op (omni-fuse, omni-plan-memory).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_INTERFACES_TD
#define OMNI_INTERFACES_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

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

//===----------------------------------------------------------------------===//
// Fusion classification (omni-fuse, docs/fusion.md)
//===----------------------------------------------------------------------===//

def Omni_FusionKind : I32EnumAttr<"FusionKind",
    "how omni-fuse treats an op", [
  I32EnumAttrCase<"Elementwise", 0>, I32EnumAttrCase<"Broadcast", 1>,
  I32EnumAttrCase<"Reshape", 2>, I32EnumAttrCase<"Reduction", 3>,
  I32EnumAttrCase<"Movement", 4>, I32EnumAttrCase<"Library", 5>,
  I32EnumAttrCase<"Opaque", 6>]> {
  let cppNamespace = "::mlir::omni";
  let genSpecializedAttr = 0;
}

def Omni_FusionKindOpInterface : OpInterface<"FusionKindOpInterface"> {
  let cppNamespace = "::mlir::omni";
  let description = [{
    How omni-fuse (and omni-plan-memory) treat an op, so that neither
    switches over op names:

    - `Elementwise`: every result element depends on the operand elements
      at the same index (math, compare, select, cast, is_finite, and/or);
    - `Broadcast`: results replicate a smaller operand or come from indices
      alone (broadcast_in_dim, iota, splat constants);
    - `Reshape`: a new view of the operand's bytes; no kernel, no buffer;
    - `Reduction`: reduces its single operand over some dimensions;
    - `Movement`: moves elements without arithmetic (transpose, slice, pad,
      concat);
    - `Library`: runs as a tuned library call and is never fused (matmul,
      conv2d, attention);
    - `Opaque`: anything else (random numbers, host calls, collectives,
      composites not yet decomposed). An op without this interface is
      Opaque: use `FusionKindOpInterface::kindOf(op)`.

    The default implementation derives the kind from the `Elementwise`
    trait; other fusible ops override `getFusionKind` (OmniFusionKind.cpp).
  }];
  let methods = [
    InterfaceMethod<[{
        Returns how omni-fuse treats this op.
      }],
      "::mlir::omni::FusionKind", "getFusionKind", (ins), [{}], [{
        if (ConcreteOp::template hasTrait<::mlir::OpTrait::Elementwise>())
          return ::mlir::omni::FusionKind::Elementwise;
        return ::mlir::omni::FusionKind::Opaque;
      }]>,
  ];
  let extraClassDeclaration = [{
    /// The fusion kind of `op`: Opaque when it does not implement the
    /// interface (ops of other dialects, host calls, collectives).
    static ::mlir::omni::FusionKind kindOf(::mlir::Operation *op) {
      if (auto kind = ::llvm::dyn_cast<FusionKindOpInterface>(op))
        return kind.getFusionKind();
      return ::mlir::omni::FusionKind::Opaque;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Sharding rules (omni-shard, docs/sharding.md)
//===----------------------------------------------------------------------===//

def Omni_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::omni";
  let description = [{
    How omni-shard may split an op's dimensions over mesh axes: a factor
    per operand and result dimension (dialects/omni/OmniShardingRule.h).
    Elementwise ops need not implement it (shardingRuleOf gives them the
    elementwise rule); an op with no rule has its operands and results
    replicated.
  }];
  let methods = [
    InterfaceMethod<[{
        Returns the op's sharding rule.
      }],
      "::mlir::omni::ShardingRule", "getShardingRule", (ins)>,
  ];
}

#endif // OMNI_INTERFACES_TD
