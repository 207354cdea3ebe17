//===- OmniBase.td - omni dialect, enums, attributes, types -*- tablegen -*-===//
//
// The omni dialect definition, its enumerations and attributes, the type
// constraints its ops share, and the op base class. Ops live in OmniOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_BASE_TD
#define OMNI_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Omni_Dialect : Dialect {
  let name = "omni";
  let cppNamespace = "::mlir::omni";
  let summary = "Tensor ops for diffusion-model RL (FlowGRPO) training programs";
  let description = [{
    The omni dialect expresses a whole FlowGRPO training iteration: tensor
    primitives, composite ops with documented decompositions, the diffusion
    RL ops whose math is normative in `docs/flowgrpo-math.md`, and
    structure ops (autodiff markers, fusion regions, host calls, meshes,
    sharding and collectives). Values are statically shaped builtin tensors
    of f32, bf16, f16, f64, i1, i32 or i64; functions and loops reuse `func`
    and `scf`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Omni_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Omni_IntElement : AnyTypeOf<[I1, I32, I64]>;

def Omni_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def Omni_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Omni_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def Omni_PredTensor : StaticShapeTensorOf<[I1]>;
/// Math of the diffusion RL ops runs in f32 (f64 in float64 programs).
def Omni_RLTensor : StaticShapeTensorOf<[F32, F64]>;
def Omni_RLScalar : 0DTensorOf<[F32, F64]>;
def Omni_I64Scalar : 0DTensorOf<[I64]>, BuildableType<
    "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))">;
/// A runtime hyper-parameter operand (docs/recipes.md section 11): a 0-D
/// f64 that replaces the f64 attribute of the same name.
def Omni_F64Scalar : 0DTensorOf<[F64]>, BuildableType<
    "::mlir::RankedTensorType::get({}, $_builder.getF64Type())">;

//===----------------------------------------------------------------------===//
// Enumerations
//===----------------------------------------------------------------------===//

class Omni_I32Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::mlir::omni";
  let genSpecializedAttr = 0;
}

class Omni_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<Omni_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Omni_CompareDirection : Omni_I32Enum<"CompareDirection",
    "elementwise comparison", [
  I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
  I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
  I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]>;
def Omni_CompareDirectionAttr
    : Omni_EnumAttr<Omni_CompareDirection, "compare_direction">;

def Omni_ReduceKind : Omni_I32Enum<"ReduceKind", "reduction", [
  I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
  I32EnumAttrCase<"min", 2>, I32EnumAttrCase<"mean", 3>]>;
def Omni_ReduceKindAttr : Omni_EnumAttr<Omni_ReduceKind, "reduce_kind">;

def Omni_GeluApproximation : Omni_I32Enum<"GeluApproximation",
    "gelu formula", [
  I32EnumAttrCase<"erf", 0>, I32EnumAttrCase<"tanh", 1>]>;
def Omni_GeluApproximationAttr
    : Omni_EnumAttr<Omni_GeluApproximation, "gelu_approximation">;

def Omni_ScheduleKind : Omni_I32Enum<"ScheduleKind",
    "sigma schedule (docs/flowgrpo-math.md section 1)", [
  I32EnumAttrCase<"static_shift", 0>, I32EnumAttrCase<"dynamic_shift", 1>]>;
def Omni_ScheduleKindAttr : Omni_EnumAttr<Omni_ScheduleKind, "schedule_kind">;

def Omni_SdeType : Omni_I32Enum<"SdeType",
    "stochastic sampler step (docs/flowgrpo-math.md section 2)", [
  I32EnumAttrCase<"sde", 0>, I32EnumAttrCase<"cps", 1>,
  I32EnumAttrCase<"ode", 2>]>;
def Omni_SdeTypeAttr : Omni_EnumAttr<Omni_SdeType, "sde_type">;

def Omni_KlForm : Omni_I32Enum<"KlForm",
    "KL estimate of grpo_loss (docs/flowgrpo-math.md section 6)", [
  I32EnumAttrCase<"reference", 0>, I32EnumAttrCase<"exact", 1>]>;
def Omni_KlFormAttr : Omni_EnumAttr<Omni_KlForm, "kl_form">;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Omni_ShardingAttr : AttrDef<Omni_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is split over the axes of a mesh";
  let description = [{
    `#omni.sharding<@mesh, [["dp"], []]>` splits dimension 0 of a tensor over
    mesh axis "dp" and replicates dimension 1. Entry `d` of the list names
    the mesh axes (major to minor) dimension `d` is split over; an empty list
    replicates it. Axes not named anywhere replicate the whole tensor.

    Constraints:
    - (C1) every entry is a list of strings;
    - (C2) no axis name appears twice.
    The mesh-dependent constraints (the mesh exists, the axes are its axes,
    sizes divide) are checked by the op that carries the attribute.
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims);
  let assemblyFormat = "`<` $mesh `,` $dims `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes dimension `dim` is split over (empty: replicated).
    ::llvm::SmallVector<::llvm::StringRef> getAxes(unsigned dim) const;
  }];
}

//===----------------------------------------------------------------------===//
// Op base
//===----------------------------------------------------------------------===//

class Omni_Op<string mnemonic, list<Trait> traits = []>
    : Op<Omni_Dialect, mnemonic, traits>;

#endif // OMNI_BASE_TD
