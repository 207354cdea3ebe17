//===- Builder.cpp - the graph-builder API of omni's frontends ------------===//

#include "frontends/builder/Builder.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
namespace od = mlir::omni;

namespace omni::fe {

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

RankedTensorType Tensor::type() const {
  return llvm::cast<RankedTensorType>(value_.getType());
}
Type Tensor::elementType() const { return type().getElementType(); }
Shape Tensor::shape() const {
  auto s = type().getShape();
  return Shape(s.begin(), s.end());
}
int64_t Tensor::rank() const { return type().getRank(); }
int64_t Tensor::dim(int64_t d) const {
  return type().getDimSize(d < 0 ? d + rank() : d);
}
int64_t Tensor::numel() const { return type().getNumElements(); }

static Tensor wrap(Graph &g, Value v) { return Tensor(&g, v); }

Tensor Tensor::reshape(const Shape &shape) const {
  if (shape == this->shape())
    return *this;
  Graph &g = graph();
  return wrap(g, od::ReshapeOp::create(g.builder(), g.loc(),
                                       g.tensorType(shape, elementType()),
                                       value_));
}

Tensor Tensor::transpose(const std::vector<int64_t> &permutation) const {
  Graph &g = graph();
  return wrap(
      g, od::TransposeOp::create(g.builder(), g.loc(), value_, permutation));
}

Tensor Tensor::broadcastInDim(const Shape &shape,
                              const std::vector<int64_t> &dims) const {
  Graph &g = graph();
  return wrap(g, od::BroadcastInDimOp::create(
                     g.builder(), g.loc(), g.tensorType(shape, elementType()),
                     value_, dims));
}

Tensor Tensor::broadcastTo(const Shape &shape) const {
  if (shape == this->shape())
    return *this;
  std::vector<int64_t> dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - rank();
  for (int64_t i = 0; i < rank(); ++i)
    dims.push_back(i + offset);
  return broadcastInDim(shape, dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  if (d < 0)
    d += rank();
  Shape s = shape();
  std::vector<int64_t> lo(s.size(), 0), hi = s, step(s.size(), 1);
  lo[d] = start;
  hi[d] = end;
  Graph &g = graph();
  return wrap(g,
              od::SliceOp::create(g.builder(), g.loc(), value_, lo, hi, step));
}

std::vector<Tensor> Tensor::chunk(int64_t parts, int64_t d) const {
  if (parts <= 0 || dim(d) % parts != 0)
    llvm::report_fatal_error("omni builder: chunk of a dimension that does "
                             "not divide into equal parts");
  int64_t size = dim(d) / parts;
  std::vector<Tensor> out;
  for (int64_t i = 0; i < parts; ++i)
    out.push_back(slice(d, i * size, (i + 1) * size));
  return out;
}

static Tensor reduce(const Tensor &x, od::ReduceKind kind,
                     std::vector<int64_t> dims, bool keepDims) {
  for (int64_t &d : dims)
    if (d < 0)
      d += x.rank();
  std::sort(dims.begin(), dims.end());
  Graph &g = x.graph();
  Tensor r = wrap(
      g, od::ReduceOp::create(g.builder(), g.loc(), kind, x.value(), dims));
  if (!keepDims)
    return r;
  Shape kept = x.shape();
  for (int64_t d : dims)
    kept[d] = 1;
  return r.reshape(kept);
}

Tensor Tensor::sum(const std::vector<int64_t> &dims, bool keepDims) const {
  return reduce(*this, od::ReduceKind::sum, dims, keepDims);
}
Tensor Tensor::mean(const std::vector<int64_t> &dims, bool keepDims) const {
  return reduce(*this, od::ReduceKind::mean, dims, keepDims);
}

Tensor Tensor::cast(Type element) const {
  if (element == elementType())
    return *this;
  Graph &g = graph();
  return wrap(g, od::CastOp::create(g.builder(), g.loc(),
                                    g.tensorType(shape(), element), value_));
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

/// NumPy broadcasting of two shapes; a mismatch is a model bug.
static Shape broadcastShape(const Shape &a, const Shape &b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      llvm::report_fatal_error("omni builder: shapes do not broadcast");
    out[i] = std::max(da, db);
  }
  return out;
}

template <typename OpTy>
static Tensor binary(const Tensor &a, const Tensor &b) {
  Shape s = broadcastShape(a.shape(), b.shape());
  Graph &g = a.graph();
  return wrap(g, OpTy::create(g.builder(), g.loc(), a.broadcastTo(s).value(),
                              b.broadcastTo(s).value()));
}

static Tensor splat(const Tensor &like, double v) {
  return like.graph().scalar(v, like.elementType());
}

Tensor operator+(const Tensor &a, const Tensor &b) {
  return binary<od::AddOp>(a, b);
}
Tensor operator-(const Tensor &a, const Tensor &b) {
  return binary<od::SubOp>(a, b);
}
Tensor operator*(const Tensor &a, const Tensor &b) {
  return binary<od::MulOp>(a, b);
}
Tensor operator/(const Tensor &a, const Tensor &b) {
  return binary<od::DivOp>(a, b);
}
Tensor operator+(const Tensor &a, double b) { return a + splat(a, b); }
Tensor operator-(const Tensor &a, double b) { return a - splat(a, b); }
Tensor operator*(const Tensor &a, double b) { return a * splat(a, b); }
Tensor operator/(const Tensor &a, double b) { return a / splat(a, b); }
Tensor operator+(double a, const Tensor &b) { return splat(b, a) + b; }
Tensor operator-(double a, const Tensor &b) { return splat(b, a) - b; }
Tensor operator*(double a, const Tensor &b) { return splat(b, a) * b; }

template <typename OpTy> static Tensor unary(const Tensor &x) {
  Graph &g = x.graph();
  return wrap(g, OpTy::create(g.builder(), g.loc(), x.value()));
}

Tensor operator-(const Tensor &a) { return unary<od::NegOp>(a); }
Tensor exp(const Tensor &x) { return unary<od::ExpOp>(x); }
Tensor log(const Tensor &x) { return unary<od::LogOp>(x); }
Tensor sqrt(const Tensor &x) { return unary<od::SqrtOp>(x); }
Tensor rsqrt(const Tensor &x) { return unary<od::RsqrtOp>(x); }
Tensor tanh(const Tensor &x) { return unary<od::TanhOp>(x); }
Tensor sin(const Tensor &x) { return unary<od::SinOp>(x); }
Tensor cos(const Tensor &x) { return unary<od::CosOp>(x); }
Tensor logistic(const Tensor &x) { return unary<od::LogisticOp>(x); }
Tensor silu(const Tensor &x) { return unary<od::SiluOp>(x); }

Tensor gelu(const Tensor &x, bool tanhApproximation) {
  Graph &g = x.graph();
  return wrap(g,
              od::GeluOp::create(g.builder(), g.loc(),
                                 tanhApproximation ? od::GeluApproximation::tanh
                                                   : od::GeluApproximation::erf,
                                 x.value()));
}

Tensor maximum(const Tensor &a, const Tensor &b) {
  return binary<od::MaxOp>(a, b);
}
Tensor minimum(const Tensor &a, const Tensor &b) {
  return binary<od::MinOp>(a, b);
}
Tensor clamp(const Tensor &x, double lo, double hi) {
  return minimum(maximum(x, splat(x, lo)), splat(x, hi));
}

Tensor softmax(const Tensor &x, int64_t dim) {
  Graph &g = x.graph();
  return wrap(g, od::SoftmaxOp::create(g.builder(), g.loc(), x.value(),
                                       dim < 0 ? dim + x.rank() : dim));
}

Tensor concat(const std::vector<Tensor> &inputs, int64_t dim) {
  Graph &g = inputs.front().graph();
  SmallVector<Value> values;
  for (const Tensor &t : inputs)
    values.push_back(t.value());
  int64_t rank = inputs.front().rank();
  return wrap(g, od::ConcatOp::create(g.builder(), g.loc(), values,
                                      dim < 0 ? dim + rank : dim));
}

/// The type contractions of `x`'s graph compute in when it differs from
/// `x`'s (f32) element type: the graph's contraction type; else null.
static Type lowPrecision(const Tensor &x) {
  Type low = x.graph().contractionType();
  if (!low || low == x.elementType() || !x.elementType().isF32())
    return Type();
  return low;
}

Tensor matmul(const Tensor &a, const Tensor &b, bool transposeA,
              bool transposeB) {
  Graph &g = a.graph();
  if (Type low = lowPrecision(a))
    return matmul(a.cast(low), b.cast(low), transposeA, transposeB)
        .cast(a.elementType());
  return wrap(g, od::MatmulOp::create(g.builder(), g.loc(), a.value(),
                                      b.value(), transposeA, transposeB));
}

Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias) {
  Graph &g = x.graph();
  if (Type low = lowPrecision(x)) {
    // The bias is added in f32, after the product is widened back.
    Tensor y =
        linear(x.cast(low), weight.cast(low), Tensor()).cast(x.elementType());
    return bias ? y + bias : y;
  }
  return wrap(g, od::LinearOp::create(g.builder(), g.loc(), x.value(),
                                      weight.value(), bias.value()));
}

Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps) {
  Graph &g = x.graph();
  return wrap(g, od::LayerNormOp::create(g.builder(), g.loc(), x.value(),
                                         weight.value(), bias.value(),
                                         g.builder().getF64FloatAttr(eps)));
}

Tensor rmsNorm(const Tensor &x, const Tensor &weight, double eps) {
  Graph &g = x.graph();
  return wrap(g, od::RmsNormOp::create(g.builder(), g.loc(), x.value(),
                                       weight.value(),
                                       g.builder().getF64FloatAttr(eps)));
}

Tensor groupNorm(const Tensor &x, int64_t groups, const Tensor &weight,
                 const Tensor &bias, double eps) {
  Shape s = x.shape(); // N, C, H, W
  int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  Tensor grouped = x.reshape({n, groups, (c / groups) * hw});
  Tensor centered = grouped - grouped.mean({2}, true);
  Tensor var = (centered * centered).mean({2}, true);
  Tensor y = (centered * rsqrt(var + eps)).reshape(s);
  if (weight)
    y = y * weight.broadcastInDim(s, {1});
  if (bias)
    y = y + bias.broadcastInDim(s, {1});
  return y;
}

Tensor conv2d(const Tensor &x, const Tensor &filter, const Tensor &bias,
              int64_t stride, int64_t padding) {
  Graph &g = x.graph();
  if (Type low = lowPrecision(x)) {
    // The bias is added in f32, after the convolution is widened back.
    Tensor y = conv2d(x.cast(low), filter.cast(low), Tensor(), stride, padding)
                   .cast(x.elementType());
    return bias ? y + bias.broadcastInDim(y.shape(), {1}) : y;
  }
  Tensor y = wrap(g, od::Conv2dOp::create(g.builder(), g.loc(), x.value(),
                                          filter.value(),
                                          ArrayRef<int64_t>{stride, stride},
                                          ArrayRef<int64_t>{padding, padding},
                                          ArrayRef<int64_t>{1, 1}));
  if (bias)
    y = y + bias.broadcastInDim(y.shape(), {1});
  return y;
}

Tensor upsampleNearest(const Tensor &x, int64_t factor) {
  Shape s = x.shape();
  Tensor b =
      x.broadcastInDim({s[0], s[1], s[2], factor, s[3], factor}, {0, 1, 2, 4});
  return b.reshape({s[0], s[1], s[2] * factor, s[3] * factor});
}

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor &mask) {
  Graph &g = q.graph();
  if (Type low = lowPrecision(q))
    return attention(q.cast(low), k.cast(low), v.cast(low),
                     mask ? mask.cast(low) : Tensor())
        .cast(q.elementType());
  return wrap(g, od::AttentionOp::create(g.builder(), g.loc(), q.value(),
                                         k.value(), v.value(), mask.value(),
                                         FloatAttr()));
}

//===----------------------------------------------------------------------===//
// Graph and Function
//===----------------------------------------------------------------------===//

Graph::Graph(MLIRContext &context)
    : context_(context), builder_(&context), loc_(builder_.getUnknownLoc()),
      module_(ModuleOp::create(builder_.getUnknownLoc())) {
  context.getOrLoadDialect<od::OmniDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  builder_.setInsertionPointToEnd(module_->getBody());
}

Graph::~Graph() = default;

void Graph::setLocation(const std::string &name) {
  loc_ = name.empty() ? Location(builder_.getUnknownLoc())
                      : Location(NameLoc::get(builder_.getStringAttr(name)));
}

RankedTensorType Graph::tensorType(const Shape &shape, Type element) {
  return RankedTensorType::get(shape, element ? element : f32());
}

Tensor Graph::full(const Shape &shape, double value, Type element) {
  RankedTensorType type = tensorType(shape, element);
  Attribute v;
  if (isa<FloatType>(type.getElementType()))
    v = builder_.getFloatAttr(type.getElementType(), value);
  else
    v = builder_.getIntegerAttr(type.getElementType(),
                                static_cast<int64_t>(value));
  auto attr = DenseElementsAttr::get(type, v);
  return wrap(*this, od::ConstantOp::create(builder_, loc_, attr));
}

Tensor Graph::scalar(double value, Type element) {
  return full({}, value, element);
}

Tensor Graph::constant(const Shape &shape, const std::vector<float> &values) {
  auto attr =
      DenseElementsAttr::get(tensorType(shape, f32()), ArrayRef<float>(values));
  return wrap(*this, od::ConstantOp::create(builder_, loc_, attr));
}

std::vector<Tensor> Graph::call(Function &callee,
                                const std::vector<Tensor> &args) {
  SmallVector<Value> values;
  for (const Tensor &t : args)
    values.push_back(t.value());
  auto call = func::CallOp::create(builder_, loc_, callee.op(), values);
  std::vector<Tensor> out;
  for (Value r : call.getResults())
    out.push_back(wrap(*this, r));
  return out;
}

Function::Function(Graph &graph, const std::string &name, bool isPublic)
    : graph_(graph), name_(name) {
  OpBuilder &b = graph.builder();
  saved_ = b.saveInsertionPoint();
  b.setInsertionPointToEnd(graph.module().getBody());
  auto fn =
      func::FuncOp::create(b, graph.loc(), name, b.getFunctionType({}, {}));
  if (!isPublic)
    fn.setPrivate();
  op_ = fn;
  b.setInsertionPointToEnd(fn.addEntryBlock());
}

func::FuncOp Function::op() const { return llvm::cast<func::FuncOp>(op_); }

Tensor Function::argument(Type type, const std::string &name) {
  func::FuncOp fn = op();
  Block &entry = fn.getBody().front();
  BlockArgument arg = entry.addArgument(type, graph_.loc());
  SmallVector<Type> inputs(entry.getArgumentTypes());
  fn.setType(FunctionType::get(&graph_.context(), inputs,
                               fn.getFunctionType().getResults()));
  if (!name.empty())
    fn.setArgAttr(arg.getArgNumber(), "omni.name",
                  graph_.builder().getStringAttr(name));
  return Tensor(&graph_, arg);
}

Tensor Function::argument(const Shape &shape, const std::string &name,
                          Type element) {
  return argument(graph_.tensorType(shape, element), name);
}

std::vector<Tensor> Function::arguments() const {
  std::vector<Tensor> out;
  for (BlockArgument a : op().getBody().front().getArguments())
    out.push_back(Tensor(&graph_, a));
  return out;
}

Tensor Function::parameter(const std::string &name, const Shape &shape) {
  auto it = parameterIndex_.find(name);
  if (it != parameterIndex_.end())
    return parameters_[it->second].second;
  Tensor t = argument(shape, name);
  parameterIndex_[name] = parameters_.size();
  parameters_.push_back({name, t});
  return t;
}

void Function::returns(const std::vector<Tensor> &results,
                       const std::vector<std::string> &names) {
  OpBuilder &b = graph_.builder();
  SmallVector<Value> values;
  SmallVector<Type> types;
  for (const Tensor &t : results) {
    values.push_back(t.value());
    types.push_back(t.value().getType());
  }
  func::ReturnOp::create(b, graph_.loc(), values);
  func::FuncOp fn = op();
  fn.setType(FunctionType::get(&graph_.context(),
                               fn.getFunctionType().getInputs(), types));
  for (size_t i = 0; i < names.size() && i < results.size(); ++i)
    if (!names[i].empty())
      fn.setResultAttr(i, "omni.name", b.getStringAttr(names[i]));
  b.restoreInsertionPoint(saved_);
  finished_ = true;
}

//===----------------------------------------------------------------------===//
// Parameters and modules
//===----------------------------------------------------------------------===//

Init Init::torchDefault(int64_t fanIn) {
  return uniform(1.0 / std::sqrt(static_cast<double>(fanIn)));
}

void ParamSet::add(const ParamSpec &spec) {
  auto it = index_.find(spec.name);
  if (it != index_.end()) {
    if (specs_[it->second].shape != spec.shape)
      llvm::report_fatal_error(llvm::Twine("omni builder: parameter ") +
                               spec.name + " used with two shapes");
    return;
  }
  index_[spec.name] = specs_.size();
  specs_.push_back(spec);
}

const ParamSpec *ParamSet::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &specs_[it->second];
}

int64_t ParamSet::numElements() const {
  int64_t n = 0;
  for (const ParamSpec &s : specs_) {
    int64_t e = 1;
    for (int64_t d : s.shape)
      e *= d;
    n += e;
  }
  return n;
}

bool LoraOptions::matches(const std::string &path) const {
  for (const std::string &t : targets)
    if (path.size() >= t.size() &&
        path.compare(path.size() - t.size(), t.size(), t) == 0 &&
        (path.size() == t.size() || path[path.size() - t.size() - 1] == '.'))
      return true;
  return false;
}

Module::Module(Function &function, ParamSet &params, std::string prefix,
               const LoraOptions *lora)
    : function_(&function), params_(&params), prefix_(std::move(prefix)),
      lora_(lora && lora->enabled() ? lora : nullptr) {}

Module Module::child(const std::string &name) const {
  Module m = *this;
  m.prefix_ = path(name);
  return m;
}

std::string Module::path(const std::string &name) const {
  return prefix_.empty() ? name : prefix_ + "." + name;
}

Tensor Module::param(const std::string &name, const Shape &shape, Init init) {
  std::string full = path(name);
  // With LoRA only the adapters train; the base model is frozen.
  bool trainable = !lora_ || full.find(".lora_A.") != std::string::npos ||
                   full.find(".lora_B.") != std::string::npos;
  params_->add({full, shape, init, trainable});
  return function_->parameter(full, shape);
}

Tensor Module::linear(const std::string &name, const Tensor &x, int64_t out,
                      bool bias) {
  int64_t in = x.dim(-1);
  Module layer = child(name);
  Tensor w = layer.param("weight", {out, in}, Init::torchDefault(in));
  Tensor b =
      bias ? layer.param("bias", {out}, Init::torchDefault(in)) : Tensor();
  if (!lora_ || !lora_->matches(layer.prefix_))
    return fe::linear(x, w, b);
  int64_t r = lora_->rank;
  Tensor a = layer.param("lora_A.weight", {r, in},
                         Init::normal(1.0 / static_cast<double>(r)));
  Tensor bb = layer.param("lora_B.weight", {out, r}, Init::zeros());
  double scale = lora_->alpha / static_cast<double>(r);
  if (lowPrecision(x)) {
    // omni.lora_linear's decomposition, each product through fe::linear so
    // it rounds its operands and the sum and scaling stay f32.
    Tensor up = fe::linear(fe::linear(x, a, Tensor()), bb, Tensor());
    return fe::linear(x, w, b) + up * scale;
  }
  Graph &g = x.graph();
  return Tensor(
      &g, od::LoraLinearOp::create(g.builder(), g.loc(), x.value(), w.value(),
                                   b.value(), a.value(), bb.value(),
                                   g.builder().getF64FloatAttr(scale)));
}

Tensor Module::layerNorm(const std::string &name, const Tensor &x, bool affine,
                         double eps) {
  if (!affine)
    return fe::layerNorm(x, Tensor(), Tensor(), eps);
  int64_t d = x.dim(-1);
  Module layer = child(name);
  // Separate statements: parameters are created in diffusers' order.
  Tensor w = layer.param("weight", {d}, Init::ones());
  Tensor b = layer.param("bias", {d}, Init::zeros());
  return fe::layerNorm(x, w, b, eps);
}

Tensor Module::rmsNorm(const std::string &name, const Tensor &x, double eps) {
  return fe::rmsNorm(x, child(name).param("weight", {x.dim(-1)}, Init::ones()),
                     eps);
}

Tensor Module::groupNorm(const std::string &name, const Tensor &x,
                         int64_t groups, double eps) {
  int64_t c = x.dim(1);
  Module layer = child(name);
  Tensor w = layer.param("weight", {c}, Init::ones());
  Tensor b = layer.param("bias", {c}, Init::zeros());
  return fe::groupNorm(x, groups, w, b, eps);
}

Tensor Module::conv2d(const std::string &name, const Tensor &x, int64_t out,
                      int64_t kernel, int64_t stride, int64_t padding) {
  int64_t in = x.dim(1);
  int64_t fanIn = in * kernel * kernel;
  Module layer = child(name);
  Tensor w = layer.param("weight", {out, in, kernel, kernel},
                         Init::torchDefault(fanIn));
  Tensor b = layer.param("bias", {out}, Init::torchDefault(fanIn));
  return fe::conv2d(x, w, b, stride, padding);
}

} // namespace omni::fe
