//===- Evaluator.h - Reference evaluator of omni programs -------*- C++ -*-===//
//
// The oracle of docs/architecture.md section 4: evaluates a function of a
// verified omni module on host tensors, op by op, with no code generation.
// Every backend is differentially tested against it and gradient checks run
// through it, so it favours being obviously right over being fast: each op is
// computed in double from its operands and, in float32 mode, rounded once to
// its result element type. The diffusion RL ops call the normative FlowGRPO
// math of runtime/flowgrpo, random_normal/random_uniform its Philox generator,
// and host_call a registry of named host functions (the rewards by default).
//
// It evaluates the omni dialect plus the func (call, return), scf (for, if,
// yield) and arith/tensor ops that programs use for scalars and indices.
// Anything else, and every problem with the inputs, is reported as a
// one-line absl::Status naming the op and its source location; evaluation
// never asserts on user input.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_REFERENCE_EVALUATOR_H
#define OMNI_COMPILER_REFERENCE_EVALUATOR_H

#include "runtime/hostfn/HostFunctions.h"
#include "runtime/io/HostTensor.h"

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

namespace omni::reference {

/// The arithmetic the evaluator models.
enum class Precision {
  /// Float32 semantics: each op is computed in double and its float results
  /// are rounded to their element type (f32, f16 or bf16; f64 stays
  /// double). For +, -, *, / and sqrt that is exactly IEEE float32
  /// arithmetic. Diffusion RL ops run runtime/flowgrpo's float instances
  /// (double for f64 tensors).
  F32,
  /// Float64 oracle: every float, whatever its declared type, is carried in
  /// double and never rounded (returned tensors keep their declared dtype
  /// but hold double values); diffusion RL ops run the double instances.
  F64,
};

/// How evaluateFunction runs.
struct EvalOptions {
  Precision precision = Precision::F32;
  /// The functions omni.host_call may name. Null means none: the caller
  /// registers what its programs call (rewards::registerRewards for the
  /// rewards, as omni-eval does).
  const HostFunctionRegistry *hostFunctions = nullptr;
  /// Deepest func.call nesting before evaluation fails (recursion guard).
  int maxCallDepth = 128;
};

/// Evaluates the func.func named `name` of `module` (which must verify) on
/// `args` and returns its results. Each argument must have exactly the
/// dtype and shape of the function's parameter (index parameters take i64
/// scalars). Fails with a one-line message for an unknown or external
/// function, wrong arguments, an op the evaluator does not support, and any
/// error an op raises at run time (out-of-range step index, integer division
/// by zero, a multi-rank collective, omni.grad before omni-autodiff, ...),
/// naming the op and its location.
absl::StatusOr<std::vector<HostTensor>>
evaluateFunction(mlir::ModuleOp module, llvm::StringRef name,
                 llvm::ArrayRef<HostTensor> args,
                 const EvalOptions &options = {});

} // namespace omni::reference

#endif // OMNI_COMPILER_REFERENCE_EVALUATOR_H
