//===- OmniOps.cpp - omni op shape inference, assembly and folders -------===//
//
// Shape inference (InferTypeOpInterface) for the ops whose result types
// follow from their operands and attributes, the custom assembly directives,
// (folders and canonicalization patterns are in OmniFolders.cpp). The inference
// functions carry the ops' numbered shape constraints: they run while parsing
// (when the result types are not spelled) and again from the verifier, which is
// why every check tolerates operands of any type. Plain verifiers are in
// OmniVerify.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "dialects/omni/OmniDiagnostics.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::omni;
using diag::asStaticTensor;
using diag::inferError;
using diag::shapeStr;

//===----------------------------------------------------------------------===//
// Custom assembly directives
//===----------------------------------------------------------------------===//

/// Prints an enum attribute as a bare keyword: `omni.reduce sum ...`.
template <typename AttrT>
static void printEnumKeyword(OpAsmPrinter &p, Operation *, AttrT attr) {
  p << stringifyEnum(attr.getValue());
}

template <typename AttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, AttrT &attr) {
  using EnumT = decltype(std::declval<AttrT>().getValue());
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword);
  if (!value)
    return parser.emitError(loc)
           << "unknown " << AttrT::getMnemonic() << " '" << keyword << "'";
  attr = AttrT::get(parser.getContext(), *value);
  return success();
}

/// Prints slice bounds as `[start:limit:stride, ...]`.
static void printSliceRanges(OpAsmPrinter &p, Operation *,
                             ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
                             ArrayRef<int64_t> strides) {
  p << "[";
  for (size_t i = 0; i < start.size(); ++i) {
    if (i)
      p << ", ";
    p << start[i] << ":" << (i < limit.size() ? limit[i] : 0) << ":"
      << (i < strides.size() ? strides[i] : 0);
  }
  p << "]";
}

static ParseResult parseSliceRanges(OpAsmParser &parser,
                                    DenseI64ArrayAttr &start,
                                    DenseI64ArrayAttr &limit,
                                    DenseI64ArrayAttr &strides) {
  SmallVector<int64_t> s, l, st;
  auto parseOne = [&]() -> ParseResult {
    int64_t a, b, c;
    if (parser.parseInteger(a) || parser.parseColon() ||
        parser.parseInteger(b) || parser.parseColon() || parser.parseInteger(c))
      return failure();
    s.push_back(a);
    l.push_back(b);
    st.push_back(c);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseOne))
    return failure();
  MLIRContext *ctx = parser.getContext();
  start = DenseI64ArrayAttr::get(ctx, s);
  limit = DenseI64ArrayAttr::get(ctx, l);
  strides = DenseI64ArrayAttr::get(ctx, st);
  return success();
}

#define GET_OP_CLASSES
#include "dialects/omni/OmniOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape inference
//===----------------------------------------------------------------------===//

namespace {
/// Reads operand `v` as a static tensor or reports which operand is not one.
/// Returns null after emitting (or, without a location, silently).
RankedTensorType tensorOperand(std::optional<Location> loc, StringRef op,
                               Value v, StringRef name) {
  RankedTensorType t = v ? asStaticTensor(v.getType()) : RankedTensorType();
  if (!t && v)
    (void)inferError(loc, op, name,
                     " must be a statically shaped tensor, found ",
                     v.getType());
  return t;
}

bool isFloatTensor(RankedTensorType t) {
  return t && isa<FloatType>(t.getElementType());
}

/// The op's properties with ODS defaults filled in. While parsing, inference
/// sees only the attributes spelled in the text; the generic adaptor getters
/// do not apply DefaultValuedAttr defaults, so read defaulted attributes
/// through this.
template <typename OpT>
typename OpT::Properties withDefaults(MLIRContext *ctx,
                                      typename OpT::Properties props) {
  OpT::populateDefaultProperties(OperationName(OpT::getOperationName(), ctx),
                                 props);
  return props;
}
} // namespace

#define OMNI_TENSOR(var, value, name)                                          \
  RankedTensorType var = tensorOperand(loc, opName, value, name);              \
  if (!var)                                                                    \
    return failure();

LogicalResult IsFiniteOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  types.push_back(t.clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getLhs(), "lhs");
  types.push_back(t.clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  // C1
  SmallVector<bool> used(t.getRank(), false);
  bool ok = static_cast<int64_t>(perm.size()) == t.getRank();
  for (int64_t p : perm) {
    if (!ok)
      break;
    ok = p >= 0 && p < t.getRank() && !used[p];
    if (ok)
      used[p] = true;
  }
  if (!ok)
    return inferError(loc, opName, "permutation [", perm,
                      "] is not a permutation of the ", t.getRank(),
                      " dimensions of the operand");
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  types.push_back(t.clone(shape));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    strides = adaptor.getStrides();
  int64_t rank = t.getRank();
  // C1
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return inferError(loc, opName, "slice has ", start.size(), " start, ",
                      limit.size(), " limit and ", strides.size(),
                      " stride entries but the operand has rank ", rank);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    // C2
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > t.getDimSize(d))
      return inferError(loc, opName, "slice ", start[d], ":", limit[d],
                        " of dimension ", d, " is outside 0:", t.getDimSize(d));
    // C3
    if (strides[d] < 1)
      return inferError(loc, opName, "stride of dimension ", d,
                        " must be >= 1, found ", strides[d]);
    shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  types.push_back(t.clone(shape));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  ValueRange inputs = adaptor.getInputs();
  // C1
  if (inputs.empty())
    return inferError(loc, opName, "needs at least one input");
  OMNI_TENSOR(first, inputs[0], "input #0");
  int64_t dim = adaptor.getDimAttr().getInt();
  // C3
  if (dim < 0 || dim >= first.getRank())
    return inferError(loc, opName, "dim ", dim, " is outside the rank ",
                      first.getRank(), " of the inputs");
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(inputs.drop_front())) {
    OMNI_TENSOR(t, v, "input");
    // C2
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return inferError(loc, opName, "input #", i + 1, " has type ", t,
                        " but input #0 has type ", first,
                        "; element type and rank must match");
    // C4
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return inferError(loc, opName, "input #", i + 1, " has shape ",
                          shapeStr(t.getShape()), " but input #0 has shape ",
                          shapeStr(first.getShape()),
                          "; they may differ only in dimension ", dim);
    shape[dim] += t.getDimSize(dim);
  }
  types.push_back(first.clone(shape));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  // C1
  if (static_cast<int64_t>(low.size()) != t.getRank() ||
      static_cast<int64_t>(high.size()) != t.getRank())
    return inferError(loc, opName, "padding has ", low.size(), " low and ",
                      high.size(), " high entries but the operand has rank ",
                      t.getRank());
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    // C2
    if (low[d] < 0 || high[d] < 0)
      return inferError(loc, opName, "padding of dimension ", d,
                        " must be non-negative, found low ", low[d], " high ",
                        high[d]);
    shape.push_back(low[d] + t.getDimSize(d) + high[d]);
  }
  types.push_back(t.clone(shape));
  return success();
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  ArrayRef<int64_t> dims = adaptor.getDims();
  // C1
  for (auto [i, d] : llvm::enumerate(dims))
    if (d < 0 || d >= t.getRank() || (i > 0 && d <= dims[i - 1]))
      return inferError(loc, opName, "dims [", dims,
                        "] must be strictly increasing and within the rank ",
                        t.getRank(), " of the operand");
  // C2
  if (adaptor.getKind() == ReduceKind::mean && !isFloatTensor(t))
    return inferError(loc, opName, "mean needs a float element type, found ",
                      t.getElementType());
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(t.getDimSize(d));
  types.push_back(t.clone(shape));
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto value = dyn_cast_if_present<ElementsAttr>(adaptor.getValueAttr());
  RankedTensorType t =
      value ? asStaticTensor(value.getType()) : RankedTensorType();
  // C1
  if (!t)
    return inferError(loc, opName,
                      "value must have a statically shaped tensor type");
  types.push_back(t);
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(lhs, adaptor.getLhs(), "lhs");
  OMNI_TENSOR(rhs, adaptor.getRhs(), "rhs");
  // C1
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return inferError(loc, opName, "operands must have rank >= 2, found ",
                      lhs.getRank(), " and ", rhs.getRank());
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, opName,
                      "element types differ: ", lhs.getElementType(), " and ",
                      rhs.getElementType());
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  // C2
  if (rr != 2 && (lr != rr || ls.take_front(lr - 2) != rs.take_front(rr - 2)))
    return inferError(loc, opName, "batch dimensions of lhs ", shapeStr(ls),
                      " and rhs ", shapeStr(rs),
                      " differ (rhs may also have rank 2)");
  int64_t m = adaptor.getTransposeLhs() ? ls[lr - 1] : ls[lr - 2];
  int64_t kl = adaptor.getTransposeLhs() ? ls[lr - 2] : ls[lr - 1];
  int64_t kr = adaptor.getTransposeRhs() ? rs[rr - 1] : rs[rr - 2];
  int64_t n = adaptor.getTransposeRhs() ? rs[rr - 2] : rs[rr - 1];
  // C3
  if (kl != kr)
    return inferError(loc, opName, "contraction dimensions differ: lhs ",
                      shapeStr(ls), " contracts ", kl, " but rhs ",
                      shapeStr(rs), " contracts ", kr);
  SmallVector<int64_t> shape(ls.take_front(lr - 2));
  shape.push_back(m);
  shape.push_back(n);
  types.push_back(lhs.clone(shape));
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<Conv2dOp>(ctx, adaptor.getProperties());
  OMNI_TENSOR(in, adaptor.getInput(), "input");
  OMNI_TENSOR(w, adaptor.getFilter(), "filter");
  // C1
  if (in.getRank() != 4 || w.getRank() != 4)
    return inferError(loc, opName,
                      "input (NCHW) and filter (OIHW) must have rank 4, "
                      "found ",
                      in.getRank(), " and ", w.getRank());
  if (in.getElementType() != w.getElementType())
    return inferError(loc, opName,
                      "element types differ: ", in.getElementType(), " and ",
                      w.getElementType());
  // C2
  if (in.getDimSize(1) != w.getDimSize(1))
    return inferError(loc, opName, "input has ", in.getDimSize(1),
                      " channels but the filter expects ", w.getDimSize(1));
  ArrayRef<int64_t> strides = props.getStrides().asArrayRef(),
                    padding = props.getPadding().asArrayRef(),
                    dilation = props.getDilation().asArrayRef();
  // C3
  if (strides.size() != 2 || padding.size() != 2 || dilation.size() != 2)
    return inferError(loc, opName,
                      "strides, padding and dilation need 2 entries each");
  for (int i = 0; i < 2; ++i)
    if (strides[i] < 1 || dilation[i] < 1 || padding[i] < 0)
      return inferError(loc, opName,
                        "strides and dilation must be >= 1 and padding >= "
                        "0, found strides [",
                        strides, "] padding [", padding, "] dilation [",
                        dilation, "]");
  SmallVector<int64_t> shape = {in.getDimSize(0), w.getDimSize(0)};
  for (int i = 0; i < 2; ++i) {
    int64_t size = in.getDimSize(2 + i) + 2 * padding[i] -
                   dilation[i] * (w.getDimSize(2 + i) - 1) - 1;
    // C4
    if (size < 0)
      return inferError(loc, opName, "the filter ", shapeStr(w.getShape()),
                        " does not fit the input ", shapeStr(in.getShape()),
                        " with padding [", padding, "] and dilation [",
                        dilation, "]");
    shape.push_back(size / strides[i] + 1);
  }
  types.push_back(in.clone(shape));
  return success();
}

/// Checks an optional 1-D per-feature parameter (norm weight or bias).
static LogicalResult checkFeatureParam(std::optional<Location> loc,
                                       StringRef opName, Value param,
                                       StringRef name, RankedTensorType x,
                                       int64_t size) {
  if (!param)
    return success();
  RankedTensorType t = tensorOperand(loc, opName, param, name);
  if (!t)
    return failure();
  if (t.getRank() != 1 || t.getDimSize(0) != size ||
      t.getElementType() != x.getElementType())
    return inferError(loc, opName, name, " has type ", t, " but expected ",
                      RankedTensorType::get({size}, x.getElementType()));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<LayerNormOp>(ctx, adaptor.getProperties());
  OMNI_TENSOR(x, adaptor.getOperand(), "operand");
  // C1
  if (x.getRank() < 1)
    return inferError(loc, opName, "operand must have rank >= 1");
  int64_t c = x.getShape().back();
  // C2
  if (failed(checkFeatureParam(loc, opName, adaptor.getWeight(), "weight", x,
                               c)) ||
      failed(checkFeatureParam(loc, opName, adaptor.getBias(), "bias", x, c)))
    return failure();
  // C3
  if (!(props.getEps().getValueAsDouble() > 0))
    return inferError(loc, opName, "eps must be > 0, found ",
                      props.getEps().getValueAsDouble());
  types.push_back(x);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<RmsNormOp>(ctx, adaptor.getProperties());
  OMNI_TENSOR(x, adaptor.getOperand(), "operand");
  // C1
  if (x.getRank() < 1)
    return inferError(loc, opName, "operand must have rank >= 1");
  // C2
  if (failed(checkFeatureParam(loc, opName, adaptor.getWeight(), "weight", x,
                               x.getShape().back())))
    return failure();
  // C3
  if (!(props.getEps().getValueAsDouble() > 0))
    return inferError(loc, opName, "eps must be > 0, found ",
                      props.getEps().getValueAsDouble());
  types.push_back(x);
  return success();
}

/// omni.attention's and omni.attention_grad's (C2) on rank-4 query, key and
/// value: batch and heads agree, key and value have one sequence length,
/// query and key one head size.
static LogicalResult checkAttentionShapes(std::optional<Location> loc,
                                          StringRef opName, RankedTensorType q,
                                          RankedTensorType k,
                                          RankedTensorType v) {
  if (k.getDimSize(0) != q.getDimSize(0) ||
      v.getDimSize(0) != q.getDimSize(0) ||
      k.getDimSize(1) != q.getDimSize(1) || v.getDimSize(1) != q.getDimSize(1))
    return inferError(loc, opName, "batch and head dimensions differ: query ",
                      shapeStr(q.getShape()), ", key ", shapeStr(k.getShape()),
                      ", value ", shapeStr(v.getShape()));
  if (k.getDimSize(2) != v.getDimSize(2))
    return inferError(loc, opName, "key has sequence length ", k.getDimSize(2),
                      " but value has ", v.getDimSize(2));
  if (k.getDimSize(3) != q.getDimSize(3))
    return inferError(loc, opName, "query has head dimension ", q.getDimSize(3),
                      " but key has ", k.getDimSize(3));
  return success();
}

/// omni.attention's and omni.attention_grad's mask rule: absent, or
/// [B|1, H|1, Sq, Sk] of the query's element type.
static LogicalResult checkAttentionMask(std::optional<Location> loc,
                                        StringRef opName, Value maskValue,
                                        RankedTensorType q,
                                        RankedTensorType k) {
  if (!maskValue)
    return success();
  OMNI_TENSOR(mask, maskValue, "mask");
  ArrayRef<int64_t> ms = mask.getShape();
  bool ok = mask.getRank() == 4 &&
            mask.getElementType() == q.getElementType() &&
            (ms[0] == 1 || ms[0] == q.getDimSize(0)) &&
            (ms[1] == 1 || ms[1] == q.getDimSize(1)) &&
            ms[2] == q.getDimSize(2) && ms[3] == k.getDimSize(2);
  if (!ok)
    return inferError(loc, opName, "mask has type ", mask,
                      " but expected shape [", q.getDimSize(0), "|1, ",
                      q.getDimSize(1), "|1, ", q.getDimSize(2), ", ",
                      k.getDimSize(2), "] of ", q.getElementType());
  return success();
}

/// omni.attention's and omni.attention_grad's scale rule: absent, or > 0.
static LogicalResult checkAttentionScale(std::optional<Location> loc,
                                         StringRef opName, FloatAttr scale) {
  if (scale && !(scale.getValueAsDouble() > 0))
    return inferError(loc, opName, "scale must be > 0, found ",
                      scale.getValueAsDouble());
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(q, adaptor.getQuery(), "query");
  OMNI_TENSOR(k, adaptor.getKey(), "key");
  OMNI_TENSOR(v, adaptor.getValue(), "value");
  // C1
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return inferError(loc, opName,
                      "query, key and value must have rank 4 ([B, H, S, D])");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return inferError(loc, opName,
                      "query, key and value must have one element type");
  // C2
  if (failed(checkAttentionShapes(loc, opName, q, k, v)))
    return failure();
  // C3
  if (failed(checkAttentionMask(loc, opName, adaptor.getMask(), q, k)))
    return failure();
  // C4
  if (failed(checkAttentionScale(loc, opName, adaptor.getScaleAttr())))
    return failure();
  SmallVector<int64_t> shape(q.getShape());
  shape[3] = v.getDimSize(3);
  types.push_back(q.clone(shape));
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(q, adaptor.getQuery(), "query");
  OMNI_TENSOR(k, adaptor.getKey(), "key");
  OMNI_TENSOR(v, adaptor.getValue(), "value");
  OMNI_TENSOR(o, adaptor.getOutput(), "output");
  OMNI_TENSOR(dO, adaptor.getDOutput(), "d_output");
  // C1
  Type element = q.getElementType();
  if (!element.isF32() && !element.isBF16() && !element.isF16())
    return inferError(loc, opName,
                      "the element type must be f32, bf16 or f16, found ", q);
  for (RankedTensorType t : {q, k, v, o, dO})
    if (t.getRank() != 4 || t.getElementType() != element)
      return inferError(
          loc, opName,
          "every operand must be a rank-4 tensor of the query's element type ",
          element, ", found ", t);
  // C2
  if (failed(checkAttentionShapes(loc, opName, q, k, v)))
    return failure();
  SmallVector<int64_t> out(q.getShape());
  out[3] = v.getDimSize(3);
  if (o.getShape() != ArrayRef<int64_t>(out) || dO.getShape() != o.getShape())
    return inferError(loc, opName, "output and d_output must have shape ",
                      shapeStr(out), ", found ", shapeStr(o.getShape()),
                      " and ", shapeStr(dO.getShape()));
  // C3
  if (failed(checkAttentionScale(loc, opName, adaptor.getScaleAttr())))
    return failure();
  // C4
  if (failed(checkAttentionMask(loc, opName, adaptor.getMask(), q, k)))
    return failure();
  types.append({q, k, v});
  return success();
}

/// Shape rule shared by linear and lora_linear (their C1/C2/C3): returns
/// the result type `[..., out]` or null after emitting.
static RankedTensorType inferLinear(std::optional<Location> loc,
                                    StringRef opName, Value inputV,
                                    Value weightV, Value biasV) {
  RankedTensorType x = tensorOperand(loc, opName, inputV, "input");
  RankedTensorType w = tensorOperand(loc, opName, weightV, "weight");
  if (!x || !w)
    return {};
  if (x.getRank() < 1 || w.getRank() != 2 ||
      x.getElementType() != w.getElementType()) {
    (void)inferError(loc, opName, "input ", x, " and weight ", w,
                     " must have rank >= 1 and rank 2 and one element type");
    return {};
  }
  if (x.getShape().back() != w.getDimSize(1)) {
    (void)inferError(loc, opName, "input has ", x.getShape().back(),
                     " features but the weight ", shapeStr(w.getShape()),
                     " expects ", w.getDimSize(1));
    return {};
  }
  if (failed(checkFeatureParam(loc, opName, biasV, "bias", x, w.getDimSize(0))))
    return {};
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = w.getDimSize(0);
  return x.clone(shape);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType t = inferLinear(loc, getOperationName(), adaptor.getInput(),
                                   adaptor.getWeight(), adaptor.getBias());
  if (!t)
    return failure();
  types.push_back(t);
  return success();
}

LogicalResult LoraLinearOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  // C1
  RankedTensorType t = inferLinear(loc, opName, adaptor.getInput(),
                                   adaptor.getWeight(), adaptor.getBias());
  if (!t)
    return failure();
  OMNI_TENSOR(a, adaptor.getLoraA(), "lora_a");
  OMNI_TENSOR(b, adaptor.getLoraB(), "lora_b");
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  int64_t out = w.getDimSize(0), in = w.getDimSize(1);
  // C2
  bool ok = a.getRank() == 2 && b.getRank() == 2 && a.getDimSize(0) >= 1 &&
            a.getDimSize(1) == in && b.getDimSize(0) == out &&
            b.getDimSize(1) == a.getDimSize(0) &&
            a.getElementType() == t.getElementType() &&
            b.getElementType() == t.getElementType();
  if (!ok)
    return inferError(loc, opName, "lora_a ", a, " and lora_b ", b,
                      " must be [r, ", in, "] and [", out,
                      ", r] with r >= 1 "
                      "and element type ",
                      t.getElementType());
  types.push_back(t);
  return success();
}

LogicalResult FlowScheduleOp::inferReturnTypes(MLIRContext *ctx,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<FlowScheduleOp>(ctx, adaptor.getProperties());
  int64_t n = adaptor.getNumStepsAttr().getInt();
  // C1
  if (n < 1)
    return inferError(loc, opName, "num_steps must be >= 1, found ", n);
  bool dynamic = adaptor.getKind() == ScheduleKind::dynamic_shift;
  // C2
  if (!dynamic && !(props.getShift().getValueAsDouble() > 0))
    return inferError(loc, opName, "shift must be > 0, found ",
                      props.getShift().getValueAsDouble());
  if (dynamic) {
    // C3
    auto seqLen = adaptor.getImageSeqLenAttr();
    if (!seqLen || seqLen.getInt() < 1)
      return inferError(loc, opName, "dynamic_shift needs image_seq_len >= 1");
    int64_t baseLen = props.getBaseSeqLen().getInt(),
            maxLen = props.getMaxSeqLen().getInt();
    if (maxLen <= baseLen)
      return inferError(loc, opName, "max_seq_len (", maxLen,
                        ") must be greater than base_seq_len (", baseLen, ")");
  }
  // C4
  if (auto terminal = adaptor.getShiftTerminalAttr()) {
    double z = terminal.getValueAsDouble();
    if (!dynamic)
      return inferError(loc, opName, "shift_terminal needs dynamic_shift");
    if (!(z > 0 && z < 1))
      return inferError(loc, opName, "shift_terminal must be in (0, 1), found ",
                        z);
  }
  Type f32 = Float32Type::get(ctx);
  types.push_back(RankedTensorType::get({n + 1}, f32));
  types.push_back(RankedTensorType::get({n}, f32));
  return success();
}

LogicalResult SdeStepOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<SdeStepOp>(ctx, adaptor.getProperties());
  // C1
  if (static_cast<bool>(adaptor.getNoise()) ==
      static_cast<bool>(adaptor.getNext()))
    return inferError(loc, opName,
                      "needs exactly one of `noise` (rollout) and `next` "
                      "(training)");
  OMNI_TENSOR(x, adaptor.getX(), "x");
  // C2 (type equality is checked by the op's traits)
  if (x.getRank() < 1)
    return inferError(loc, opName,
                      "x must have a batch dimension (rank >= 1), found ", x);
  OMNI_TENSOR(sigmas, adaptor.getSigmas(), "sigmas");
  // C3
  if (sigmas.getRank() != 1 || sigmas.getDimSize(0) < 2)
    return inferError(loc, opName,
                      "sigmas must be 1-D with at least 2 entries, found ",
                      sigmas);
  // C4
  double a = props.getNoiseLevel().getValueAsDouble();
  if (!(a >= 0))
    return inferError(loc, opName, "noise_level must be >= 0, found ", a);
  Type elt = x.getElementType();
  types.push_back(x);
  types.push_back(RankedTensorType::get({x.getDimSize(0)}, elt));
  types.push_back(x);
  types.push_back(RankedTensorType::get({}, elt));
  return success();
}

LogicalResult CfgCombineOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  OMNI_TENSOR(t, adaptor.getOperand(), "operand");
  // C1
  if (t.getRank() < 1 || t.getDimSize(0) == 0 || t.getDimSize(0) % 2 != 0)
    return inferError(loc, opName,
                      "operand must hold [uncond; cond] along dimension 0 "
                      "(an even, non-zero size), found ",
                      t);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] /= 2;
  types.push_back(t.clone(shape));
  return success();
}

LogicalResult GrpoLossOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<GrpoLossOp>(ctx, adaptor.getProperties());
  OMNI_TENSOR(lp, adaptor.getLogProb(), "log_prob");
  OMNI_TENSOR(old, adaptor.getOldLogProb(), "old_log_prob");
  OMNI_TENSOR(adv, adaptor.getAdvantages(), "advantages");
  // C1
  if (lp.getRank() != 1 || old != lp || adv != lp)
    return inferError(loc, opName,
                      "log_prob, old_log_prob and advantages must be 1-D of "
                      "one type, found ",
                      lp, ", ", old, ", ", adv);
  Type elt = lp.getElementType();
  Value mean = adaptor.getMean(), refMean = adaptor.getRefMean(),
        std = adaptor.getStd(), dt = adaptor.getDt();
  bool hasKl = mean && refMean && std;
  // C2
  if (!hasKl && (mean || refMean || std))
    return inferError(loc, opName,
                      "mean, ref_mean and std must be given together");
  if (hasKl) {
    OMNI_TENSOR(m, mean, "mean");
    OMNI_TENSOR(r, refMean, "ref_mean");
    OMNI_TENSOR(s, std, "std");
    if (m != r || m.getRank() < 1 || m.getDimSize(0) != lp.getDimSize(0) ||
        m.getElementType() != elt)
      return inferError(loc, opName, "mean ", m, " and ref_mean ", r,
                        " must have one type with ", lp.getDimSize(0),
                        " rows of ", elt);
    if (s != RankedTensorType::get({}, elt))
      return inferError(loc, opName, "std must be a scalar of ", elt,
                        ", found ", s);
  }
  // C3
  double beta = props.getBeta().getValueAsDouble();
  if (beta != 0 && !hasKl)
    return inferError(loc, opName, "beta = ", beta,
                      " needs the KL operands kl(mean, ref_mean, std)");
  if (adaptor.getBetaValue() && !hasKl)
    return inferError(loc, opName,
                      "a beta(...) operand needs the KL operands kl(mean, "
                      "ref_mean, std)");
  // C4
  bool exact = props.getKlForm().getValue() == KlForm::exact;
  SdeType sdeType = props.getSdeType().getValue();
  if (exact && sdeType == SdeType::ode)
    return inferError(loc, opName,
                      "kl_form = exact needs sde_type sde or cps, found ode");
  bool needsDt = exact && sdeType == SdeType::sde;
  if (needsDt != static_cast<bool>(dt))
    return inferError(
        loc, opName,
        needsDt ? "kl_form = exact needs dt(...)"
        : exact ? "dt is not used with sde_type = cps (its std is the "
                  "transition std)"
                : "dt is only used with kl_form = exact");
  if (dt) {
    OMNI_TENSOR(d, dt, "dt");
    if (d != RankedTensorType::get({}, elt))
      return inferError(loc, opName, "dt must be a scalar of ", elt, ", found ",
                        d);
  }
  // C5
  double clip = props.getClipRange().getValueAsDouble(),
         advClip = props.getAdvClipMax().getValueAsDouble();
  if (!(clip >= 0) || !(advClip > 0) || !(beta >= 0))
    return inferError(loc, opName,
                      "needs clip_range >= 0, adv_clip_max > 0 and beta >= "
                      "0, found ",
                      clip, ", ", advClip, ", ", beta);
  types.append(4, RankedTensorType::get({}, elt));
  return success();
}

LogicalResult ClipGradNormOp::inferReturnTypes(MLIRContext *ctx,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  StringRef opName = getOperationName();
  auto props = withDefaults<ClipGradNormOp>(ctx, adaptor.getProperties());
  // C1
  if (adaptor.getGrads().empty())
    return inferError(loc, opName, "needs at least one gradient");
  // C2
  double maxNorm = props.getMaxNorm().getValueAsDouble();
  if (!(maxNorm > 0))
    return inferError(loc, opName, "max_norm must be > 0, found ", maxNorm);
  for (Value g : adaptor.getGrads())
    types.push_back(g.getType());
  types.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

#undef OMNI_TENSOR
