//===- OmniOps.td - omni dialect operations ----------------*- tablegen -*-===//
//
// Every op of the omni dialect, grouped as docs/architecture.md section 3 groups them:
// primitives, composites, diffusion RL ops and structure ops. Each op states
// its semantics and numbered constraints (C1..Cn); the verifier checks carry
// the same labels and each has a case in test/dialects/omni/invalid.mlir.
// Ops whose result shape follows from operands and attributes implement
// InferTypeOpInterface; the rest spell their result type.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_OPS_TD
#define OMNI_OPS_TD

include "dialects/omni/OmniBase.td"
include "dialects/omni/OmniInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"

/// Differentiable ops carry their VJP rule (OmniVJP*.cpp).
defvar VJP = DeclareOpInterfaceMethods<Omni_VJPOpInterface>;
/// Ops omni-fuse may put in a fusion region: the kind follows the
/// Elementwise trait (Fusible) or is the op's own (FusibleAs,
/// OmniFusionKind.cpp). Ops with neither are Opaque.
defvar Fusible = Omni_FusionKindOpInterface;
defvar FusibleAs = DeclareOpInterfaceMethods<Omni_FusionKindOpInterface,
                                             ["getFusionKind"]>;
/// Non-elementwise ops omni-shard can split carry their sharding rule
/// (OmniShardingRules.cpp).
defvar Shardable = DeclareOpInterfaceMethods<Omni_ShardingRuleOpInterface>;

//===----------------------------------------------------------------------===//
// Primitives: elementwise
//===----------------------------------------------------------------------===//

class Omni_UnaryOp<string mnemonic, Type type, string formula,
                   list<Trait> traits = []>
    : Omni_Op<mnemonic, !listconcat(traits,
        [Pure, Elementwise, SameOperandsAndResultType, Fusible])> {
  let summary = "elementwise " # formula;
  let description = [{
    Applies `}] # formula # [{` to every element. Operand and result have the
    same type.

    ```mlir
    %y = omni.}] # mnemonic # [{ %x : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins type:$operand);
  let results = (outs type:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def Omni_NegOp : Omni_UnaryOp<"neg", Omni_NumericTensor, "-x", [VJP]> {
  let hasFolder = 1;
}
def Omni_AbsOp : Omni_UnaryOp<"abs", Omni_NumericTensor, "|x|", [VJP]>;
def Omni_SignOp : Omni_UnaryOp<"sign", Omni_NumericTensor, "sign(x)", [VJP]>;
def Omni_ExpOp : Omni_UnaryOp<"exp", Omni_FloatTensor, "exp(x)", [VJP]>;
def Omni_LogOp : Omni_UnaryOp<"log", Omni_FloatTensor, "log(x)", [VJP]>;
def Omni_SqrtOp : Omni_UnaryOp<"sqrt", Omni_FloatTensor, "sqrt(x)", [VJP]>;
def Omni_RsqrtOp : Omni_UnaryOp<"rsqrt", Omni_FloatTensor, "1/sqrt(x)", [VJP]>;
def Omni_TanhOp : Omni_UnaryOp<"tanh", Omni_FloatTensor, "tanh(x)", [VJP]>;
def Omni_SinOp : Omni_UnaryOp<"sin", Omni_FloatTensor, "sin(x)", [VJP]>;
def Omni_CosOp : Omni_UnaryOp<"cos", Omni_FloatTensor, "cos(x)", [VJP]>;
def Omni_ErfOp : Omni_UnaryOp<"erf", Omni_FloatTensor, "erf(x)", [VJP]>;
def Omni_LogisticOp
    : Omni_UnaryOp<"logistic", Omni_FloatTensor, "1/(1+exp(-x))", [VJP]>;
def Omni_FloorOp : Omni_UnaryOp<"floor", Omni_FloatTensor, "floor(x)", [VJP]>;

def Omni_IsFiniteOp : Omni_Op<"is_finite",
    [Pure, Elementwise, InferTypeOpAdaptor, Fusible]> {
  let summary = "elementwise test for a finite value";
  let description = [{
    True where the element is neither NaN nor an infinity. The result is an
    i1 tensor of the operand's shape.

    ```mlir
    %ok = omni.is_finite %x : tensor<4xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$operand);
  let results = (outs Omni_PredTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
}

class Omni_BinaryOp<string mnemonic, Type type, string formula,
                    list<Trait> traits = []>
    : Omni_Op<mnemonic, !listconcat(traits,
        [Pure, Elementwise, SameOperandsAndResultType, Fusible])> {
  let summary = "elementwise " # formula;
  let description = [{
    Computes `}] # formula # [{` element by element. Both operands and the
    result have the same type; broadcasting is explicit (broadcast_in_dim).

    ```mlir
    %z = omni.}] # mnemonic # [{ %x, %y : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Omni_AddOp : Omni_BinaryOp<"add", Omni_NumericTensor, "x + y",
                               [Commutative, VJP]> {
  let hasFolder = 1;
}
def Omni_SubOp : Omni_BinaryOp<"sub", Omni_NumericTensor, "x - y", [VJP]> {
  let hasFolder = 1;
}
def Omni_MulOp : Omni_BinaryOp<"mul", Omni_NumericTensor, "x * y",
                               [Commutative, VJP]> {
  let hasFolder = 1;
}
def Omni_DivOp : Omni_BinaryOp<"div", Omni_NumericTensor, "x / y", [VJP]> {
  let hasFolder = 1;
}
def Omni_MaxOp : Omni_BinaryOp<"max", Omni_NumericTensor, "max(x, y)",
                               [Commutative, VJP]>;
def Omni_MinOp : Omni_BinaryOp<"min", Omni_NumericTensor, "min(x, y)",
                               [Commutative, VJP]>;
def Omni_PowOp : Omni_BinaryOp<"pow", Omni_FloatTensor, "x ^ y", [VJP]>;
def Omni_AndOp : Omni_BinaryOp<"and", Omni_PredTensor, "x and y",
                               [Commutative]>;
def Omni_OrOp : Omni_BinaryOp<"or", Omni_PredTensor, "x or y",
                              [Commutative]>;

def Omni_CompareOp : Omni_Op<"compare",
    [Pure, Elementwise, SameTypeOperands, InferTypeOpAdaptor, Fusible]> {
  let summary = "elementwise comparison";
  let description = [{
    Compares two tensors of the same type element by element and returns an
    i1 tensor of their shape. Comparisons with NaN are false except `ne`.

    ```mlir
    %p = omni.compare lt, %x, %y : tensor<4xf32>
    ```
  }];
  let arguments = (ins Omni_CompareDirectionAttr:$direction,
                       Omni_NumericTensor:$lhs, Omni_NumericTensor:$rhs);
  let results = (outs Omni_PredTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($direction) `,` $lhs `,` $rhs attr-dict `:` type($lhs)
  }];
}

def Omni_SelectOp : Omni_Op<"select",
    [VJP, Pure, Elementwise, Fusible,
     AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise choice";
  let description = [{
    `result[i] = pred[i] ? on_true[i] : on_false[i]`.

    Constraints:
    - (C1) `pred` has the shape of `on_true` (checked by the Elementwise
      trait).

    ```mlir
    %r = omni.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Omni_PredTensor:$pred, Omni_Tensor:$on_true,
                       Omni_Tensor:$on_false);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($result)
  }];
  let hasFolder = 1;
}

def Omni_CastOp : Omni_Op<"cast", [VJP, Pure, Elementwise, Fusible]> {
  let summary = "elementwise element-type conversion";
  let description = [{
    Converts every element to the result's element type: floats round to
    nearest even, float to int truncates toward zero, to i1 means `!= 0`.

    Constraints:
    - (C1) operand and result have the same shape (checked by the
      Elementwise trait).

    ```mlir
    %h = omni.cast %x : tensor<4xf32> -> tensor<4xbf16>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Primitives: shape and data movement
//===----------------------------------------------------------------------===//

def Omni_BroadcastInDimOp : Omni_Op<"broadcast_in_dim", [Shardable, VJP, Pure, FusibleAs]> {
  let summary = "broadcast a tensor into a larger shape";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]`; result
    dimensions not named are new. `result[idx] = operand[idx']` where
    `idx'[i] = operand_dim(i) == 1 ? 0 : idx[dims[i]]`.

    Constraints:
    - (C1) operand and result have the same element type;
    - (C2) `dims` has one entry per operand dimension;
    - (C3) `dims` is strictly increasing and within the result rank;
    - (C4) operand dimension `i` is 1 or equals result dimension `dims[i]`.

    ```mlir
    %b = omni.broadcast_in_dim %x, dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, DenseI64ArrayAttr:$dims);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand `,` `dims` `=` $dims attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Omni_ReshapeOp : Omni_Op<"reshape", [Shardable, VJP, Pure, FusibleAs]> {
  let summary = "reinterpret a tensor with a new shape (row-major)";
  let description = [{
    Constraints:
    - (C1) operand and result have the same element type;
    - (C2) operand and result have the same number of elements.

    ```mlir
    %r = omni.reshape %x : tensor<2x6xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Omni_TransposeOp : Omni_Op<"transpose", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    Constraints:
    - (C1) `permutation` is a permutation of `0..rank-1`.

    ```mlir
    %t = omni.transpose %x, permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand `,` `permutation` `=` $permutation attr-dict `:` type($operand)
    `->` type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Omni_SliceOp : Omni_Op<"slice", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "strided static slice";
  let description = [{
    Takes `operand[start[d] : limit[d] : strides[d]]` in every dimension `d`.
    Result dimension `d` is `ceil((limit[d] - start[d]) / strides[d])`.

    Constraints:
    - (C1) `start`, `limit` and `strides` have one entry per dimension;
    - (C2) `0 <= start[d] <= limit[d] <= dim(d)`;
    - (C3) `strides[d] >= 1`.

    ```mlir
    %s = omni.slice %x [0:2:1, 1:3:1] : tensor<4x4xf32> -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$strides);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand custom<SliceRanges>($start, $limit, $strides) attr-dict `:`
    type($operand) `->` type($result)
  }];
  let hasFolder = 1;
}

def Omni_ConcatOp : Omni_Op<"concat", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "concatenate tensors along a dimension";
  let description = [{
    Constraints:
    - (C1) at least one input;
    - (C2) all inputs have the same element type and rank;
    - (C3) `0 <= dim < rank`;
    - (C4) inputs agree on every dimension except `dim`.

    ```mlir
    %c = omni.concat %a, %b dim = 0 : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Variadic<Omni_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, $result)
  }];
  let hasFolder = 1;
}

def Omni_PadOp : Omni_Op<"pad", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "pad with a constant at both ends of each dimension";
  let description = [{
    Result dimension `d` is `low[d] + dim(d) + high[d]`; new elements hold
    `value`.

    Constraints:
    - (C1) `low` and `high` have one entry per dimension;
    - (C2) all padding amounts are non-negative.

    ```mlir
    %p = omni.pad %x low = [0, 1] high = [0, 1] value = 0.0 : tensor<2x2xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand `low` `=` $low `high` `=` $high `value` `=` $value attr-dict `:`
    type($operand) `->` type($result)
  }];
  let hasFolder = 1;
}

def Omni_ReduceOp : Omni_Op<"reduce", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "reduce over dimensions (sum, max, min, mean)";
  let description = [{
    Reduces the named dimensions, which disappear from the result. `mean`
    divides the sum by the number of reduced elements. Reducing no
    dimension returns the operand.

    Constraints:
    - (C1) `dims` is strictly increasing and within the operand rank;
    - (C2) `mean` needs a float element type.

    ```mlir
    %s = omni.reduce sum %x dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
    ```
  }];
  let arguments = (ins Omni_ReduceKindAttr:$kind, Omni_NumericTensor:$operand,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Omni_NumericTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) $operand `dims` `=` $dims attr-dict `:`
    type($operand) `->` type($result)
  }];
  let hasFolder = 1;
}

def Omni_IotaOp : Omni_Op<"iota", [Pure, FusibleAs]> {
  let summary = "indices along a dimension";
  let description = [{
    `result[idx] = idx[dim]`, converted to the element type.

    Constraints:
    - (C1) `0 <= dim < rank` of the result.

    ```mlir
    %i = omni.iota dim = 0 : tensor<4x2xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Omni_NumericTensor:$result);
  let assemblyFormat = "`dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Omni_ConstantOp : Omni_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor, FusibleAs]> {
  let summary = "tensor constant";
  let description = [{
    A tensor whose value is the `value` attribute.

    Constraints:
    - (C1) `value` has a statically shaped tensor type of an omni element type.

    ```mlir
    %c = omni.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Primitives: contractions and random numbers
//===----------------------------------------------------------------------===//

def Omni_MatmulOp : Omni_Op<"matmul", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "(batched) matrix product with optional transposes";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`), `rhs` is
    `[..., K, N]` (`[..., N, K]` with `transpose_rhs`); the result is
    `[..., M, N]`. Leading (batch) dimensions are equal, or `rhs` has rank 2
    and is shared by every batch. Accumulation is in f32 for f16/bf16.

    Constraints:
    - (C1) both operands have rank >= 2 and the same element type;
    - (C2) batch dimensions agree (or `rhs` has rank 2);
    - (C3) contraction dimensions agree.

    ```mlir
    %c = omni.matmul %a, %b transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_NumericTensor:$lhs, Omni_NumericTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Omni_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,`
    type($rhs) `->` type($result)
  }];
}

def Omni_Conv2dOp : Omni_Op<"conv2d", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "2-D convolution, NCHW input and OIHW filter (PyTorch layout)";
  let description = [{
    Cross-correlation as torch.nn.functional.conv2d with `groups = 1`:
    output size `floor((H + 2*padding - dilation*(KH-1) - 1) / stride) + 1`.

    Constraints:
    - (C1) input and filter have rank 4 and the same float element type;
    - (C2) input channels equal filter channels;
    - (C3) `strides`, `padding`, `dilation` have two entries; strides and
      dilation >= 1, padding >= 0;
    - (C4) every output dimension is >= 1.

    ```mlir
    %y = omni.conv2d %x, %w {padding = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x8x8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$input, Omni_FloatTensor:$filter,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter attr-dict `:` type($input) `,` type($filter) `->`
    type($result)
  }];
}

class Omni_RandomOp<string mnemonic, string distribution>
    : Omni_Op<mnemonic, [Pure]> {
  let summary = "counter-based " # distribution # " random numbers";
  let description = [{
    Draws }] # distribution # [{ values with Philox 4x32-10 (docs/rng.md):
    the element at row-major index `j` depends only on `key`, `counter` and
    `offset + j`, so the same values come out on every backend and for every
    split of a batch across ranks (pass the split's element offset).

    ```mlir
    %e = omni.}] # mnemonic # [{ %key, %counter, %offset : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Omni_I64Scalar:$key, Omni_I64Scalar:$counter,
                       Omni_I64Scalar:$offset);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $key `,` $counter `,` $offset attr-dict `:` type($result)
  }];
}

def Omni_RandomNormalOp : Omni_RandomOp<"random_normal", "standard normal">;
def Omni_RandomUniformOp : Omni_RandomOp<"random_uniform", "uniform [0, 1)">;

//===----------------------------------------------------------------------===//
// Composites (decomposed by omni-decompose)
//===----------------------------------------------------------------------===//

def Omni_SoftmaxOp : Omni_Op<"softmax", [VJP, Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `dim`.

    Constraints:
    - (C1) `0 <= dim < rank`.

    ```mlir
    %p = omni.softmax %x, dim = 1 : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$operand, I64Attr:$dim);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = "$operand `,` `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Omni_LayerNormOp : Omni_Op<"layer_norm",
    [VJP, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + eps) * weight + bias` with the biased
    variance over the last dimension (torch.nn.LayerNorm); `weight` and
    `bias` are optional (MMDiT's adaLN norms have neither).

    Constraints:
    - (C1) the operand has rank >= 1;
    - (C2) `weight` and `bias`, when present, are 1-D of the last dimension's
      size and the operand's element type;
    - (C3) `eps > 0`.

    ```mlir
    %y = omni.layer_norm %x weight %w bias %b {eps = 1.0e-06} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$operand,
                       Optional<Omni_FloatTensor>:$weight,
                       Optional<Omni_FloatTensor>:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Omni_RmsNormOp : Omni_Op<"rms_norm", [VJP, Pure, InferTypeOpAdaptor]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2) + eps) * weight` over the last dimension
    (diffusers RMSNorm, used for SD3.5's q/k norm).

    Constraints:
    - (C1) the operand has rank >= 1;
    - (C2) `weight`, when present, is 1-D of the last dimension's size and
      the operand's element type;
    - (C3) `eps > 0`.

    ```mlir
    %y = omni.rms_norm %x weight %w {eps = 1.0e-06} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$operand,
                       Optional<Omni_FloatTensor>:$weight,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$eps);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`weight` $weight^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Omni_GeluOp : Omni_Op<"gelu", [VJP, Pure, SameOperandsAndResultType]> {
  let summary = "GELU activation (erf or tanh form)";
  let description = [{
    `erf`: `0.5 x (1 + erf(x / sqrt(2)))`; `tanh`:
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (diffusers
    `approximate="tanh"`, used in SD3's feed-forward).

    ```mlir
    %y = omni.gelu tanh %x : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Omni_GeluApproximationAttr:$approximation,
                       Omni_FloatTensor:$operand);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($approximation) $operand attr-dict `:` type($result)
  }];
}

def Omni_SiluOp : Omni_UnaryOp<"silu", Omni_FloatTensor, "x * logistic(x)", [VJP]>;

def Omni_AttentionOp : Omni_Op<"attention", [Shardable, VJP, Pure, InferTypeOpAdaptor,
    FusibleAs]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale + mask) v` over `[B, H, S, D]` tensors; `scale`
    defaults to `1/sqrt(D)`; `mask` is additive, of shape `[B|1, H|1, Sq, Sk]`.

    Constraints:
    - (C1) query, key and value have rank 4 and the same element type;
    - (C2) batch and head dimensions agree; key and value have the same
      sequence length; query and key have the same head dimension;
    - (C3) the mask has shape `[B|1, H|1, Sq, Sk]` and the element type;
    - (C4) `scale > 0` when given.

    ```mlir
    %o = omni.attention %q, %k, %v : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$query, Omni_FloatTensor:$key,
                       Omni_FloatTensor:$value,
                       Optional<Omni_FloatTensor>:$mask,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Omni_AttentionGradOp : Omni_Op<"attention_grad", [Shardable, Pure,
    InferTypeOpAdaptor, FusibleAs]> {
  let summary = "the cotangents of omni.attention's query, key and value";
  let description = [{
    Given `omni.attention`'s operands, its result `output` and the result's
    cotangent `d_output`, the cotangents of query, key and value: with
    `P = softmax(q k^T * scale + mask)`, `dS = P (d_output v^T -
    rowsum(d_output * output))`, `dq = dS k * scale`, `dk = dS^T q * scale`,
    `dv = P^T d_output`. The mask's cotangent is not among its results
    (omni.attention's VJP computes it apart, where something uses it).
    omni.attention's VJP emits it for f32, bf16 and f16; every target runs
    it as one library call that never materializes a `[B, H, Sq, Sk]`
    matrix where it can (the cpu driver, the cuda driver's flash kernels:
    flash-attention-2's backward); omni-decompose's
    `decompose-attention-grad` rewrites it into matmuls and a softmax for
    targets without the call.

    bf16 and f16 operands are widened exactly and everything is computed
    in f32, `dq`, `dk` and `dv` rounded once to the element type; a library
    call may round `P` and `dS` to the element type before the products
    that read them, as flash attention does for its tensor cores
    (docs/precision.md gives the bound).

    Constraints:
    - (C1) every operand has rank 4 and the same element type, f32, bf16
      or f16;
    - (C2) query, key and value as for omni.attention; `output` and
      `d_output` have shape `[B, H, Sq, Dv]`;
    - (C3) `scale > 0` when given (default `1/sqrt(D)`);
    - (C4) the mask, when given, as omni.attention's (`[B|1, H|1, Sq, Sk]`).

    ```mlir
    %dq, %dk, %dv = omni.attention_grad %q, %k, %v, %o, %do : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$query, Omni_FloatTensor:$key,
                       Omni_FloatTensor:$value, Omni_FloatTensor:$output,
                       Omni_FloatTensor:$d_output,
                       Optional<Omni_FloatTensor>:$mask,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Omni_FloatTensor:$d_query, Omni_FloatTensor:$d_key,
                      Omni_FloatTensor:$d_value);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $d_output (`mask` $mask^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Omni_LinearOp : Omni_Op<"linear", [VJP, Pure, InferTypeOpAdaptor]> {
  let summary = "affine map x W^T + b (torch.nn.Linear layout)";
  let description = [{
    `input` is `[..., in]`, `weight` is `[out, in]`, `bias` is `[out]`; the
    result is `[..., out]`.

    Constraints:
    - (C1) input rank >= 1, weight rank 2, same element types;
    - (C2) the input's last dimension equals the weight's second;
    - (C3) `bias`, when present, has shape `[out]`.

    ```mlir
    %y = omni.linear %x, %w bias %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$input, Omni_FloatTensor:$weight,
                       Optional<Omni_FloatTensor>:$bias);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Diffusion RL (normative math: docs/flowgrpo-math.md)
//===----------------------------------------------------------------------===//

def Omni_FlowScheduleOp : Omni_Op<"flow_schedule",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "sigmas and timesteps of a flow-matching sampler";
  let description = [{
    Produces `sigmas` (N+1 values, decreasing from 1 to 0) and `timesteps`
    (N values, `1000 * sigma`) as docs/flowgrpo-math.md section 1 defines them, with a
    static shift (SD3/SD3.5, `shift`) or a dynamic, resolution-dependent
    shift (Qwen-Image; `image_seq_len`, `base_shift`, `max_shift`,
    `base_seq_len`, `max_seq_len`, optional `shift_terminal`). The op folds
    to constants.

    Constraints:
    - (C1) `num_steps >= 1`;
    - (C2) `static_shift`: `shift > 0`;
    - (C3) `dynamic_shift`: `image_seq_len >= 1` is given and
      `max_seq_len > base_seq_len`;
    - (C4) `shift_terminal`, when given, is in (0, 1) and needs
      `dynamic_shift`.

    ```mlir
    %sigmas, %timesteps = omni.flow_schedule static_shift steps = 10 {shift = 3.0} : tensor<11xf32>, tensor<10xf32>
    ```
  }];
  let arguments = (ins Omni_ScheduleKindAttr:$kind, I64Attr:$num_steps,
      DefaultValuedAttr<F64Attr, "3.0">:$shift,
      OptionalAttr<I64Attr>:$image_seq_len,
      DefaultValuedAttr<F64Attr, "0.5">:$base_shift,
      DefaultValuedAttr<F64Attr, "0.9">:$max_shift,
      DefaultValuedAttr<I64Attr, "256">:$base_seq_len,
      DefaultValuedAttr<I64Attr, "8192">:$max_seq_len,
      OptionalAttr<F64Attr>:$shift_terminal);
  let results = (outs 1DTensorOf<[F32]>:$sigmas, 1DTensorOf<[F32]>:$timesteps);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) `steps` `=` $num_steps attr-dict `:`
    type($sigmas) `,` type($timesteps)
  }];
  let hasFolder = 1;
}

def Omni_SdeStepOp : Omni_Op<"sde_step",
    [VJP, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor,
     AllTypesMatch<["x", "v"]>,
     OptionalTypesMatchWith<"noise has the type of x", "x", "noise", "$_self">,
     OptionalTypesMatchWith<"next has the type of x", "x", "next", "$_self">]> {
  let summary = "one sampler step with its Gaussian log-probability";
  let description = [{
    Maps `x` at step `step` to the next sample with velocity `v` and the
    schedule `sigmas` (docs/flowgrpo-math.md section 2). In rollout the op is given
    `noise` e and returns `next = mean + q e`; in training it is given the
    stored `next` sample and recomputes its log-probability. Results: the
    next sample, `log_prob` (the mean of the elementwise log-density over
    each batch row), the transition `mean`, and `std` (type `sde`: std_dev
    without sqrt(-dt); `cps`: the transition std). Type `ode`, or
    `noise_level = 0`, is the Euler step with `log_prob` all zeros.

    `noise_level(%a)`, a 0-D f64 operand, replaces the attribute with a
    value known at run time (a runtime hyper-parameter, docs/recipes.md
    section 11): the coefficients are computed from it as from the
    attribute (scalars in f64 rounded once to the element type), so equal
    values give equal bits. Its value must be > 0: the Euler step is a
    compile-time choice (type `ode` or the attribute 0).

    Constraints:
    - (C1) exactly one of `noise` and `next` is given;
    - (C2) `x`, `v` and the given tensor have the same type, of rank >= 1;
    - (C3) `sigmas` is 1-D with at least 2 entries;
    - (C4) `noise_level >= 0`; the operand, when given, is a 0-D f64.

    ```mlir
    %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%i] noise %e {noise_level = 0.7} : tensor<4x16xf32>, tensor<11xf32>
    %xn2, %lp2, %mu2, %std2 = omni.sde_step sde %x, %v, %sigmas[%i] noise %e noise_level(%a) : tensor<4x16xf32>, tensor<11xf32>
    ```
  }];
  let arguments = (ins Omni_SdeTypeAttr:$type, Omni_RLTensor:$x,
      Omni_RLTensor:$v, 1DTensorOf<[F32]>:$sigmas, Index:$step,
      Optional<Omni_RLTensor>:$noise, Optional<Omni_RLTensor>:$next,
      Optional<Omni_F64Scalar>:$noise_level_value,
      DefaultValuedAttr<F64Attr, "0.7">:$noise_level);
  let results = (outs Omni_RLTensor:$next_sample, Omni_RLTensor:$log_prob,
                      Omni_RLTensor:$mean, Omni_RLScalar:$std);
  let assemblyFormat = [{
    custom<EnumKeyword>($type) $x `,` $v `,` $sigmas `[` $step `]`
    (`noise` $noise^)? (`next` $next^)?
    (`noise_level` `(` $noise_level_value^ `)`)? attr-dict `:` type($x) `,`
    type($sigmas)
  }];
}

def Omni_CfgCombineOp : Omni_Op<"cfg_combine", [VJP, Pure, InferTypeOpAdaptor]> {
  let summary = "classifier-free guidance over a doubled batch";
  let description = [{
    The operand holds `[uncond; cond]` along dimension 0 (2B rows); the
    result is `v_u + g (v_c - v_u)` with B rows. `guidance_scale(%g)`, a
    0-D f64 operand, replaces the attribute `g` with a value known at run
    time (docs/recipes.md section 11), rounded to the element type as the
    attribute is.

    Constraints:
    - (C1) rank >= 1 and an even, non-zero dimension 0;
    - (C2) the `guidance_scale` operand, when given, is a 0-D f64.

    ```mlir
    %v = omni.cfg_combine %vv {guidance_scale = 4.5} : tensor<8x16xf32> -> tensor<4x16xf32>
    %w = omni.cfg_combine %vv guidance_scale(%g) {guidance_scale = 4.5} : tensor<8x16xf32> -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$operand,
      Optional<Omni_F64Scalar>:$guidance_scale_value,
      F64Attr:$guidance_scale);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`guidance_scale` `(` $guidance_scale_value^ `)`)? attr-dict `:`
    type($operand) `->` type($result)
  }];
}

def Omni_GroupAdvantagesOp : Omni_Op<"group_advantages",
    [Pure, SameOperandsAndResultType]> {
  let summary = "group-normalized advantages of the global batch";
  let description = [{
    `A_i = (r_i - mean_group(i)) / (std + eps)` over consecutive groups of
    `group_size` rewards; `std` over the whole batch (`global_std`, default)
    or the group, with `ddof` 0 (default) or 1; `norm_by_std = false` gives
    `r_i - mean`. See docs/flowgrpo-math.md section 5.

    Constraints:
    - (C1) rewards are 1-D and their count is a multiple of `group_size`;
    - (C2) `group_size >= 1`;
    - (C3) `ddof` is 0 or 1;
    - (C4) `eps >= 0`.

    ```mlir
    %a = omni.group_advantages %r {group_size = 2} : tensor<4xf32>
    ```
  }];
  let arguments = (ins Omni_RLTensor:$rewards, I64Attr:$group_size,
      DefaultValuedAttr<BoolAttr, "true">:$global_std,
      DefaultValuedAttr<I64Attr, "0">:$ddof,
      DefaultValuedAttr<F64Attr, "1.0e-4">:$eps,
      DefaultValuedAttr<BoolAttr, "true">:$norm_by_std);
  let results = (outs Omni_RLTensor:$result);
  let assemblyFormat = "$rewards attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Omni_GrpoLossOp : Omni_Op<"grpo_loss",
    [VJP, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "clipped policy-gradient loss with KL and metrics";
  let description = [{
    With `r = exp(log_prob - old_log_prob)` and `A` clamped to
    `[-adv_clip_max, adv_clip_max]`:
    `loss = mean_b max(-A r, -A clamp(r, 1-clip_range, 1+clip_range)) + beta kl`
    where `kl = mean_b(mean((mean - ref_mean)^2) / (2 std^2))` (`reference`)
    or divides by `2 q^2` with `q` the step's transition std (`exact`, the
    KL of the two Gaussian transitions): `q = std sqrt(-dt)` for
    `sde_type = sde`, `q = std` for `sde_type = cps`, whose std already is
    the transition std (so there `exact` equals `reference`). `sde_type`
    names the step type of the sde_step that produced `mean` and `std`; only
    the exact form reads it. Results: `loss`,
    `approx_kl = mean((lp - old_lp)^2) / 2`, `clipfrac` (fraction with
    `|r - 1| > clip_range`) and `kl` (0 without KL operands). See
    docs/flowgrpo-math.md section 6.

    `clip_range(%c)`, `adv_clip_max(%m)` and `beta(%b)`, 0-D f64 operands,
    replace the attributes of those names with values known at run time
    (runtime hyper-parameters, docs/recipes.md section 11); the scalars
    derived from them (`1 + clip_range`, ...) are computed in f64 and
    rounded once to the element type, as from the attributes, so equal
    values give equal bits. Their values must satisfy (C5).

    Constraints:
    - (C1) `log_prob`, `old_log_prob`, `advantages` are 1-D of one type;
    - (C2) `mean`, `ref_mean`, `std` are given together; `mean` and
      `ref_mean` have one type with the batch as dimension 0, `std` is a
      scalar of the element type;
    - (C3) `beta != 0` or a `beta` operand needs the KL operands;
    - (C4) `dt` (a scalar) is given exactly when `kl_form = exact` and
      `sde_type = sde`; `kl_form = exact` needs `sde_type` sde or cps;
    - (C5) `clip_range >= 0`, `adv_clip_max > 0`, `beta >= 0`;
    - (C6) the `clip_range`, `adv_clip_max` and `beta` operands, when given,
      are 0-D f64.

    ```mlir
    %loss, %akl, %cf, %kl = omni.grpo_loss %lp, %old, %adv : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Omni_RLTensor:$log_prob, Omni_RLTensor:$old_log_prob,
      Omni_RLTensor:$advantages, Optional<Omni_RLTensor>:$mean,
      Optional<Omni_RLTensor>:$ref_mean, Optional<Omni_RLScalar>:$std,
      Optional<Omni_RLScalar>:$dt,
      Optional<Omni_F64Scalar>:$clip_range_value,
      Optional<Omni_F64Scalar>:$adv_clip_max_value,
      Optional<Omni_F64Scalar>:$beta_value,
      DefaultValuedAttr<F64Attr, "1.0e-4">:$clip_range,
      DefaultValuedAttr<F64Attr, "5.0">:$adv_clip_max,
      DefaultValuedAttr<F64Attr, "0.0">:$beta,
      DefaultValuedAttr<Omni_KlFormAttr, "KlForm::reference">:$kl_form,
      DefaultValuedAttr<Omni_SdeTypeAttr, "SdeType::sde">:$sde_type);
  let results = (outs Omni_RLScalar:$loss, Omni_RLScalar:$approx_kl,
                      Omni_RLScalar:$clipfrac, Omni_RLScalar:$kl);
  let assemblyFormat = [{
    $log_prob `,` $old_log_prob `,` $advantages
    (`kl` `(` $mean^ `,` $ref_mean `,` $std `)`)? (`dt` `(` $dt^ `)`)?
    (`clip_range` `(` $clip_range_value^ `)`)?
    (`adv_clip_max` `(` $adv_clip_max_value^ `)`)?
    (`beta` `(` $beta_value^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Omni_AdamWOp : Omni_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "one AdamW update (torch semantics)";
  let description = [{
    With `t = step` (1-based): `p -= lr * weight_decay * p`;
    `m = beta1 m + (1 - beta1) g`; `v = beta2 v + (1 - beta2) g^2`;
    `p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)`.

    Constraints:
    - (C1) `lr > 0`, `eps > 0`, `weight_decay >= 0`;
    - (C2) `0 <= beta1 < 1` and `0 <= beta2 < 1`.

    ```mlir
    %p2, %m2, %v2 = omni.adamw %p, %g, %m, %v, %t {lr = 1.0e-3} : tensor<8xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$param, Omni_FloatTensor:$grad,
      Omni_FloatTensor:$m, Omni_FloatTensor:$v, Omni_I64Scalar:$step,
      F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.9">:$beta1,
      DefaultValuedAttr<F64Attr, "0.999">:$beta2,
      DefaultValuedAttr<F64Attr, "1.0e-8">:$eps,
      DefaultValuedAttr<F64Attr, "1.0e-4">:$weight_decay);
  let results = (outs Omni_FloatTensor:$new_param, Omni_FloatTensor:$new_m,
                      Omni_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $step attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Omni_ClipGradNormOp : Omni_Op<"clip_grad_norm",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "global gradient-norm clipping";
  let description = [{
    `norm = sqrt(sum over all grads of g^2)` (accumulated in f64, returned
    as f32); every gradient `g` of element type `T` is multiplied by
    `min(T(max_norm) / (T(norm) + T(1e-6)), 1)`, computed in `T`: torch's
    `torch.nn.utils.clip_grad_norm_` (which flow_grpo calls), so a gradient
    is scaled when `norm + 1e-6 > max_norm` (by a factor just below 1 when
    `norm` is just below `max_norm`), and f64 gradients are scaled by an
    f64 coefficient. A non-finite norm zeroes every gradient; the caller
    sees it in `norm` and skips the update.

    Constraints:
    - (C1) at least one gradient;
    - (C2) `max_norm > 0`.

    ```mlir
    %g:2, %n = omni.clip_grad_norm %a, %b {max_norm = 1.0} : tensor<8xf32>, tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Variadic<Omni_FloatTensor>:$grads,
                       DefaultValuedAttr<F64Attr, "1.0">:$max_norm);
  let results = (outs Variadic<Omni_FloatTensor>:$clipped,
                      0DTensorOf<[F32]>:$norm);
  let assemblyFormat = "$grads attr-dict `:` type($grads)";
}

def Omni_LoraLinearOp : Omni_Op<"lora_linear", [VJP, Pure, InferTypeOpAdaptor]> {
  let summary = "linear layer with a low-rank adapter";
  let description = [{
    `y = x W^T + b + scale (x A^T) B^T` with frozen `weight` `[out, in]`,
    optional `bias` `[out]`, `lora_a` `[r, in]` and `lora_b` `[out, r]`;
    `scale` is alpha / r.

    Constraints:
    - (C1) the operands satisfy linear's constraints;
    - (C2) `lora_a` is `[r, in]` and `lora_b` is `[out, r]` with r >= 1, of
      the input's element type.

    ```mlir
    %y = omni.lora_linear %x, %w lora(%a, %b) {scale = 2.0} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_FloatTensor:$input, Omni_FloatTensor:$weight,
                       Optional<Omni_FloatTensor>:$bias,
                       Omni_FloatTensor:$lora_a, Omni_FloatTensor:$lora_b,
                       F64Attr:$scale);
  let results = (outs Omni_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? `lora` `(` $lora_a `,` $lora_b `)`
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Structure: autodiff markers
//===----------------------------------------------------------------------===//

class Omni_GradOpBase<string mnemonic>
    : Omni_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<AnyType>:$operands, DenseI64ArrayAttr:$wrt);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` `wrt` `=` $wrt attr-dict `:`
    functional-type($operands, $results)
  }];
  let extraClassDeclaration = [{
    /// Number of leading results that are the callee's own results.
    unsigned getNumValueResults();
  }];
}

def Omni_GradOp : Omni_GradOpBase<"grad"> {
  let summary = "gradient of a function's first result (autodiff marker)";
  let description = [{
    Calls `callee` on the operands and returns the gradient of its first
    result (a scalar loss) with respect to the operands named by `wrt`.
    omni-autodiff expands the marker into forward and backward IR.

    Constraints:
    - (C1) `callee` names a `func.func` in the enclosing symbol table;
    - (C2) the operands match the callee's arguments;
    - (C3) the callee's first result is a 0-D float tensor;
    - (C4) `wrt` is non-empty, strictly increasing and names operands;
    - (C5) every `wrt` operand is a float tensor;
    - (C6) the results are the `wrt` operands' types, in order.

    ```mlir
    %gw = omni.grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
}

def Omni_ValueAndGradOp : Omni_GradOpBase<"value_and_grad"> {
  let summary = "a function's results and its first result's gradient";
  let description = [{
    Like omni.grad, but the results are the callee's results (loss first,
    then auxiliary outputs such as metrics) followed by the gradients.

    Constraints: C1-C5 of omni.grad, and
    - (C6) the results are the callee's result types followed by the `wrt`
      operands' types.

    ```mlir
    %l, %gw = omni.value_and_grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Structure: fusion regions and host calls
//===----------------------------------------------------------------------===//

def Omni_FusionOp : Omni_Op<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "a region compiled to one kernel";
  let description = [{
    Formed by omni-fuse: the body computes the results from the inputs (its
    block arguments) and is code-generated as one kernel. The region is
    isolated from above: everything it reads is an input.

    Constraints:
    - (C1) the block arguments match the inputs' types;
    - (C2) the yielded values match the result types;
    - (C3) the body holds no fusion, host_call or collective op.

    ```mlir
    %r = omni.fusion (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
      %s = omni.add %x, %y : tensor<4xf32>
      omni.yield %s : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Omni_Tensor>:$inputs);
  let results = (outs Variadic<Omni_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
}

def Omni_YieldOp : Omni_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"FusionOp">]> {
  let summary = "fusion region terminator";
  let description = [{
    Returns the region's results.

    ```mlir
    omni.yield %s : tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Omni_Tensor>:$operands);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
}

def Omni_HostCallOp : Omni_Op<"host_call", [Shardable]> {
  let summary = "call a function registered with the runtime";
  let description = [{
    Runs the named host function (a reward such as `jpeg_compressibility`,
    or any function the runtime registers) on host copies of the operands.
    Not pure: it is never merged or removed.

    Constraints:
    - (C1) `callee` is a non-empty name of `[A-Za-z0-9_.]` characters that
      does not start with a digit.

    ```mlir
    %r = omni.host_call "jpeg_compressibility"(%img) : (tensor<4x3x32x32xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$callee, Variadic<Omni_Tensor>:$operands);
  let results = (outs Variadic<Omni_Tensor>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` attr-dict `:` functional-type($operands, $results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Structure: meshes, sharding and collectives
//===----------------------------------------------------------------------===//

def Omni_MeshOp : Omni_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named device mesh";
  let description = [{
    Declares a logical mesh of devices with named axes, for example data
    parallel `dp` times tensor parallel `tp`. Sharding attributes and
    collectives refer to it by symbol.

    Constraints:
    - (C1) `axes` and `shape` are non-empty and have the same length;
    - (C2) axis names are non-empty and unique;
    - (C3) every axis size is >= 1.

    ```mlir
    omni.mesh @mesh axes = ["dp", "tp"] shape = [4, 2]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $sym_name `axes` `=` $axes `shape` `=` $shape attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of the named axis, or std::nullopt when the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
  }];
}

def Omni_ShardOp : Omni_Op<"shard", [VJP, Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "annotate how a tensor is sharded";
  let description = [{
    Returns its operand unchanged and records the sharding omni-shard must
    give it. Shapes are global (unsharded).

    Constraints:
    - (C1) the sharding's mesh is an `omni.mesh`;
    - (C2) the sharding has one entry per tensor dimension;
    - (C3) every named axis is an axis of the mesh;
    - (C4) each dimension is divisible by the product of its axes' sizes.

    ```mlir
    %s = omni.shard %x : tensor<8x4xf32> to #omni.sharding<@mesh, [["dp"], []]>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, Omni_ShardingAttr:$sharding);
  let results = (outs Omni_Tensor:$result);
  // The sharding comes last: a dialect attribute swallows a following `: type`.
  let assemblyFormat = [{
    $operand `:` type($result) `to` qualified($sharding) attr-dict
  }];
}

class Omni_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Omni_Op<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code commonConstraints = [{
    - (C1) `mesh` names an `omni.mesh`;
    - (C2) `axes` is non-empty, without repeats, and names axes of the mesh;
  }];
}

def Omni_AllReduceOp : Omni_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "reduce across the ranks of mesh axes";
  let description = [{
    Every rank of the group formed by `axes` receives the elementwise
    reduction (sum, max, min or mean) of all the group's operands.

    Constraints:
  }] # commonConstraints # [{
    ```mlir
    %s = omni.all_reduce sum %g over @mesh ["dp"] : tensor<8xf32>
    ```
  }];
  let arguments = (ins Omni_ReduceKindAttr:$kind, Omni_NumericTensor:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Omni_NumericTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) $operand `over` $mesh $axes attr-dict `:`
    type($result)
  }];
}

def Omni_AllGatherOp : Omni_CollectiveOp<"all_gather"> {
  let summary = "concatenate the group's tensors along a dimension";
  let description = [{
    Every rank receives the operands of its group concatenated along `dim`
    in rank order.

    Constraints:
  }] # commonConstraints # [{
    - (C3) operand and result have the same element type and rank, and
      `0 <= dim < rank`;
    - (C4) result dimension `dim` is the operand's times the group size;
      other dimensions are equal.

    ```mlir
    %g = omni.all_gather %x over @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $axes `dim` `=` $dim attr-dict `:` type($operand)
    `->` type($result)
  }];
}

def Omni_ReduceScatterOp : Omni_CollectiveOp<"reduce_scatter"> {
  let summary = "reduce across the group, each rank keeping one slice";
  let description = [{
    Reduces the group's operands elementwise and gives rank `k` of the group
    the `k`-th of `group size` equal slices along `dim`.

    Constraints:
  }] # commonConstraints # [{
    - (C3) operand and result have the same element type and rank, and
      `0 <= dim < rank`;
    - (C4) operand dimension `dim` is the result's times the group size;
      other dimensions are equal.

    ```mlir
    %s = omni.reduce_scatter sum %g over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Omni_ReduceKindAttr:$kind, Omni_NumericTensor:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let results = (outs Omni_NumericTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) $operand `over` $mesh $axes `dim` `=` $dim
    attr-dict `:` type($operand) `->` type($result)
  }];
}

def Omni_BroadcastOp : Omni_CollectiveOp<"broadcast",
    [SameOperandsAndResultType]> {
  let summary = "copy one rank's tensor to its whole group";
  let description = [{
    Every rank of the group receives the operand of the group's rank `root`.

    Constraints:
  }] # commonConstraints # [{
    - (C3) `0 <= root < group size`.

    ```mlir
    %b = omni.broadcast %x over @mesh ["dp"] root = 0 : tensor<8xf32>
    ```
  }];
  let arguments = (ins Omni_Tensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$root);
  let results = (outs Omni_Tensor:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $axes `root` `=` $root attr-dict `:` type($result)
  }];
}

def Omni_AxisIndexOp : Omni_CollectiveOp<"axis_index", [Pure]> {
  let summary = "this rank's position in the group of mesh axes";
  let description = [{
    The group rank of the running rank in the group that `axes` form: its
    coordinates on `axes`, row-major in the listed order (the rank a
    collective over the same axes gives it). omni-shard inserts it to find
    a rank's block of a sharded dimension; a single-rank program's value
    is 0.

    Constraints:
  }] # commonConstraints # [{
    ```mlir
    %k = omni.axis_index over @mesh ["dp", "fsdp"] : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Omni_I64Scalar:$result);
  let assemblyFormat = [{
    `over` $mesh $axes attr-dict `:` type($result)
  }];
}

#endif // OMNI_OPS_TD
