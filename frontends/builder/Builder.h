//===- Builder.h - the graph-builder API of omni's frontends ----*- C++ -*-===//
//
// A small C++ API for writing models as omni IR (docs/architecture.md section
// 7), in the spirit of a PyTorch nn.Module's forward:
//
//   Graph g(context);
//   Function fn(g, "velocity");
//   Tensor x = fn.argument({4, 64}, "x");
//   Module m(fn, params);                    // collects named parameters
//   Tensor y = silu(m.linear("proj_in", x, 128)) * 0.5 + x.mean({1}, true);
//   fn.returns({y});
//
// - Tensor is a handle to an SSA value with arithmetic operators that
//   broadcast like NumPy (trailing dimensions aligned); every op's result
//   shape is inferred by the dialect.
// - Function builds one func.func; parameters asked for through a Module
//   become trailing arguments of that function, named (`omni.name`) with
//   their full dotted path, as diffusers/PyTorch name them.
// - ParamSet records every parameter's name, shape, initializer and whether
//   it is trained, so a recipe can build the optimizer state and the
//   initializer around any model.
//
// Only MLIR's core IR headers are included; the dialect's op headers stay
// in Builder.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_BUILDER_BUILDER_H
#define OMNI_FRONTENDS_BUILDER_BUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace omni::fe {

using Shape = std::vector<int64_t>;

class Graph;
class Function;

/// A handle to a tensor value under construction. Cheap to copy.
class Tensor {
public:
  Tensor() = default;
  Tensor(Graph *graph, mlir::Value value) : graph_(graph), value_(value) {}

  explicit operator bool() const { return static_cast<bool>(value_); }
  mlir::Value value() const { return value_; }
  Graph &graph() const { return *graph_; }
  mlir::RankedTensorType type() const;
  mlir::Type elementType() const;
  Shape shape() const;
  int64_t rank() const;
  /// Dimension `d`; negative `d` counts from the end.
  int64_t dim(int64_t d) const;
  int64_t numel() const;

  Tensor reshape(const Shape &shape) const;
  Tensor transpose(const std::vector<int64_t> &permutation) const;
  /// broadcast_in_dim: operand dimension i goes to result dimension dims[i].
  Tensor broadcastInDim(const Shape &shape,
                        const std::vector<int64_t> &dims) const;
  /// NumPy broadcasting to `shape` (trailing dimensions aligned).
  Tensor broadcastTo(const Shape &shape) const;
  /// `[start, end)` along dimension `d` (negative d allowed), step 1.
  Tensor slice(int64_t d, int64_t start, int64_t end) const;
  /// Splits dimension `d` into `parts` equal chunks (torch.chunk).
  std::vector<Tensor> chunk(int64_t parts, int64_t d) const;
  Tensor sum(const std::vector<int64_t> &dims, bool keepDims = false) const;
  Tensor mean(const std::vector<int64_t> &dims, bool keepDims = false) const;
  Tensor cast(mlir::Type elementType) const;

private:
  Graph *graph_ = nullptr;
  mlir::Value value_;
};

Tensor operator+(const Tensor &a, const Tensor &b);
Tensor operator-(const Tensor &a, const Tensor &b);
Tensor operator*(const Tensor &a, const Tensor &b);
Tensor operator/(const Tensor &a, const Tensor &b);
Tensor operator+(const Tensor &a, double b);
Tensor operator-(const Tensor &a, double b);
Tensor operator*(const Tensor &a, double b);
Tensor operator/(const Tensor &a, double b);
Tensor operator+(double a, const Tensor &b);
Tensor operator-(double a, const Tensor &b);
Tensor operator*(double a, const Tensor &b);
Tensor operator-(const Tensor &a);

Tensor exp(const Tensor &x);
Tensor log(const Tensor &x);
Tensor sqrt(const Tensor &x);
Tensor rsqrt(const Tensor &x);
Tensor tanh(const Tensor &x);
Tensor sin(const Tensor &x);
Tensor cos(const Tensor &x);
Tensor logistic(const Tensor &x);
Tensor silu(const Tensor &x);
/// GELU; `tanhApproximation` as diffusers' `approximate="tanh"`.
Tensor gelu(const Tensor &x, bool tanhApproximation);
Tensor maximum(const Tensor &a, const Tensor &b);
Tensor minimum(const Tensor &a, const Tensor &b);
Tensor clamp(const Tensor &x, double lo, double hi);
Tensor softmax(const Tensor &x, int64_t dim);
Tensor concat(const std::vector<Tensor> &inputs, int64_t dim);
/// `a @ b` with optional transposes (batched over leading dimensions).
Tensor matmul(const Tensor &a, const Tensor &b, bool transposeA = false,
              bool transposeB = false);
/// `x W^T + b` (torch.nn.functional.linear); `bias` may be null.
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias);
/// Layer norm over the last dimension; `weight`/`bias` may be null.
Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps);
/// RMS norm over the last dimension; `weight` may be null.
Tensor rmsNorm(const Tensor &x, const Tensor &weight, double eps);
/// Group norm of an NCHW tensor (torch.nn.GroupNorm), built from
/// primitives: the statistics are over each group's channels and pixels.
Tensor groupNorm(const Tensor &x, int64_t groups, const Tensor &weight,
                 const Tensor &bias, double eps);
/// NCHW convolution with an OIHW filter; `bias` [O] may be null.
Tensor conv2d(const Tensor &x, const Tensor &filter, const Tensor &bias,
              int64_t stride, int64_t padding);
/// Nearest-neighbour upsampling of an NCHW tensor by an integer factor
/// (torch.nn.functional.interpolate(mode="nearest")).
Tensor upsampleNearest(const Tensor &x, int64_t factor);
/// Scaled dot-product attention over [B, H, S, D] tensors. `mask` (null:
/// none) is added to the scaled scores before the softmax, of shape
/// [B|1, H|1, Sq, Sk] (omni.attention's); with a low-precision contraction
/// type it is cast with q, k and v.
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor &mask = Tensor());

/// Owns the module being built and the insertion point.
class Graph {
public:
  explicit Graph(mlir::MLIRContext &context);
  ~Graph();

  mlir::MLIRContext &context() { return context_; }
  mlir::OpBuilder &builder() { return builder_; }
  mlir::Location loc() const { return loc_; }
  /// Ops built from now on carry `name` as their location (shows in
  /// diagnostics and in the printed IR with --mlir-print-debuginfo).
  void setLocation(const std::string &name);
  mlir::ModuleOp module() { return *module_; }
  /// Hands the finished module over.
  mlir::OwningOpRef<mlir::ModuleOp> release() { return std::move(module_); }

  mlir::Type f32() { return builder_.getF32Type(); }
  mlir::Type bf16() { return builder_.getBF16Type(); }
  mlir::Type i64() { return builder_.getI64Type(); }

  /// The element type the contractions (matmul, linear, conv2d, attention)
  /// built from now on compute in; null (the default) or f32: as given.
  /// With bf16, f32 operands are rounded to bf16 (omni.cast) right before
  /// the op and its bf16 result is widened back to f32, so the graph around
  /// it (norms, softmax outside attention, elementwise, biases) stays f32
  /// (docs/precision.md).
  void setContractionType(mlir::Type element) { contraction_ = element; }
  mlir::Type contractionType() const { return contraction_; }
  mlir::RankedTensorType tensorType(const Shape &shape, mlir::Type element);

  /// A constant of `shape` filled with `value` (f32 unless said).
  Tensor full(const Shape &shape, double value, mlir::Type element = {});
  Tensor scalar(double value, mlir::Type element = {});
  /// A dense f32 constant with row-major `values`.
  Tensor constant(const Shape &shape, const std::vector<float> &values);
  /// `func.call @callee(args)`.
  std::vector<Tensor> call(Function &callee, const std::vector<Tensor> &args);

private:
  mlir::MLIRContext &context_;
  mlir::OpBuilder builder_;
  mlir::Location loc_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::Type contraction_;
};

/// Sets the graph's contraction type for a scope (Graph::setContractionType)
/// and restores the previous one on exit.
class ContractionScope {
public:
  ContractionScope(Graph &graph, mlir::Type element)
      : graph_(graph), saved_(graph.contractionType()) {
    graph.setContractionType(element);
  }
  ~ContractionScope() { graph_.setContractionType(saved_); }
  ContractionScope(const ContractionScope &) = delete;
  ContractionScope &operator=(const ContractionScope &) = delete;

private:
  Graph &graph_;
  mlir::Type saved_;
};

/// Builds one func.func at the end of the module. The graph's insertion
/// point is inside this function until `returns`.
class Function {
public:
  Function(Graph &graph, const std::string &name, bool isPublic = false);
  Function(const Function &) = delete;
  Function &operator=(const Function &) = delete;

  Graph &graph() { return graph_; }
  const std::string &name() const { return name_; }
  mlir::func::FuncOp op() const;

  /// Appends an argument; `name` (optional) becomes its omni.name.
  Tensor argument(const Shape &shape, const std::string &name = "",
                  mlir::Type element = {});
  Tensor argument(mlir::Type type, const std::string &name = "");
  /// Arguments so far, in order.
  std::vector<Tensor> arguments() const;
  /// The parameter argument named `name`, or a new one (appended).
  Tensor parameter(const std::string &name, const Shape &shape);
  /// The parameter arguments in order of creation: (name, tensor).
  const std::vector<std::pair<std::string, Tensor>> &parameters() const {
    return parameters_;
  }
  /// Finishes the function; `names` (optional) name the results.
  void returns(const std::vector<Tensor> &results,
               const std::vector<std::string> &names = {});
  bool finished() const { return finished_; }

private:
  Graph &graph_;
  std::string name_;
  mlir::Operation *op_ = nullptr;
  mlir::OpBuilder::InsertPoint saved_;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::map<std::string, size_t> parameterIndex_;
  bool finished_ = false;
};

/// How a parameter is initialized when the program draws it from a seed.
struct Init {
  enum class Kind { Zeros, Ones, Normal, Uniform };
  Kind kind = Kind::Zeros;
  /// Normal: the standard deviation; Uniform: U(-scale, scale).
  double scale = 0.0;

  static Init zeros() { return {Kind::Zeros, 0.0}; }
  static Init ones() { return {Kind::Ones, 0.0}; }
  static Init normal(double std) { return {Kind::Normal, std}; }
  static Init uniform(double bound) { return {Kind::Uniform, bound}; }
  /// PyTorch's default for Linear/Conv weights and biases:
  /// U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  static Init torchDefault(int64_t fanIn);
};

struct ParamSpec {
  std::string name;
  Shape shape;
  Init init;
  bool trainable = true;
};

/// Every parameter a model asked for, in order of first use.
class ParamSet {
public:
  /// Records `spec` (or checks it against an earlier one of the same name).
  void add(const ParamSpec &spec);
  const std::vector<ParamSpec> &specs() const { return specs_; }
  const ParamSpec *find(const std::string &name) const;
  int64_t numElements() const;

private:
  std::vector<ParamSpec> specs_;
  std::map<std::string, size_t> index_;
};

/// LoRA on linear layers (docs/flowgrpo-math.md section 7): adapters named as
/// PEFT names them (`<layer>.lora_A.weight` [r, in], `<layer>.lora_B.weight`
/// [out, r]); everything else is frozen.
struct LoraOptions {
  int64_t rank = 0; // 0: no LoRA
  double alpha = 0.0;
  /// A linear layer gets an adapter when its path ends with one of these.
  std::vector<std::string> targets;
  bool enabled() const { return rank > 0; }
  bool matches(const std::string &path) const;
};

/// A naming scope for parameters (like an nn.Module), with the layers
/// models are written in. Copies share the function and parameter set.
class Module {
public:
  Module(Function &function, ParamSet &params, std::string prefix = "",
         const LoraOptions *lora = nullptr);

  /// The scope `<prefix>.<name>`.
  Module child(const std::string &name) const;
  Module operator[](const std::string &name) const { return child(name); }
  std::string path(const std::string &name) const;
  Graph &graph() const { return function_->graph(); }

  /// The parameter `<prefix>.<name>` (created on first use).
  Tensor param(const std::string &name, const Shape &shape, Init init);

  /// nn.Linear(in, out): `<name>.weight` [out, in], `<name>.bias` [out].
  Tensor linear(const std::string &name, const Tensor &x, int64_t out,
                bool bias = true);
  /// nn.LayerNorm over the last dimension; without `affine`, no parameters.
  Tensor layerNorm(const std::string &name, const Tensor &x, bool affine,
                   double eps);
  /// diffusers RMSNorm with a weight.
  Tensor rmsNorm(const std::string &name, const Tensor &x, double eps);
  /// nn.GroupNorm(groups, C) with affine parameters on NCHW input.
  Tensor groupNorm(const std::string &name, const Tensor &x, int64_t groups,
                   double eps);
  /// nn.Conv2d(C, out, k, stride, padding) with a bias.
  Tensor conv2d(const std::string &name, const Tensor &x, int64_t out,
                int64_t kernel, int64_t stride = 1, int64_t padding = 0);

private:
  Function *function_;
  ParamSet *params_;
  std::string prefix_;
  const LoraOptions *lora_;
};

} // namespace omni::fe

#endif // OMNI_FRONTENDS_BUILDER_BUILDER_H
