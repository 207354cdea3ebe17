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

#include <optional>
#include <string>
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
/// by zero, a collective over more than 1 rank (see evaluateSpmd),
/// omni.grad before omni-autodiff, ...),
/// naming the op and its location.
absl::StatusOr<std::vector<HostTensor>>
evaluateFunction(mlir::ModuleOp module, llvm::StringRef name,
                 llvm::ArrayRef<HostTensor> args,
                 const EvalOptions &options = {});

//===----------------------------------------------------------------------===//
// SPMD programs (docs/reference-evaluator.md "SPMD programs on N ranks")
//===----------------------------------------------------------------------===//

/// Evaluates @name of `module` as an SPMD program on `numRanks` simulated
/// ranks (one interpreter per rank, each on its own thread) and returns
/// each rank's results. Every omni.mesh of the module must have numRanks
/// ranks. Collectives compute what step.fbs's Collective command does on
/// the group their mesh axes form (row-major, docs/backend.md "Channels and
/// the mesh"), reducing in group rank order with the runtime's
/// accumulation (f32 in f32), so results match the runtime bit for bit
/// where its own are deterministic; omni.axis_index is the rank's group
/// rank. perRankArgs[r] are rank r's arguments (local shapes; see
/// shardArguments). A rank that fails makes every rank fail: the status is
/// "rank <r>: <its message>"; collectives that can never complete (a rank
/// returned without reaching one, the ranks wait on different groups) fail
/// the same way instead of hanging. The ranks' threads share `options`:
/// its host functions are called concurrently.
absl::StatusOr<std::vector<std::vector<HostTensor>>>
evaluateSpmd(mlir::ModuleOp module, llvm::StringRef name, int64_t numRanks,
             llvm::ArrayRef<std::vector<HostTensor>> perRankArgs,
             const EvalOptions &options = {});

/// Each rank's arguments from the global (unsharded) ones: an argument
/// with `omni.sharding` gets rank r's block of its sharded dimension
/// (block k = rows [k*c, (k+1)*c) of the global tensor, c the local size;
/// rows past the global size are zero padding, as step.fbs's
/// StateSharding), every other argument is copied (replicated). The global
/// argument must have the parameter's `omni.global_type` (or its type when
/// it has none).
absl::StatusOr<std::vector<std::vector<HostTensor>>>
shardArguments(mlir::ModuleOp module, llvm::StringRef name, int64_t numRanks,
               llvm::ArrayRef<HostTensor> globalArgs);

/// The first op whose sharded value does not reassemble to the unsharded
/// one.
struct ShardedMismatch {
  int64_t traceId = 0;
  std::string opName;   // "omni.matmul"
  std::string location; // of the op in the sharded program
  unsigned result = 0;  // result index
  int64_t rank = 0;     // the first rank whose value is wrong
  double maxError = 0;  // of that rank (infinite for a shape mismatch)
  std::string detail;   // one line: what was compared, worst element
};

/// What compareSharded found.
struct ShardedComparison {
  /// Traced op results compared (occurrences times results).
  int64_t valuesCompared = 0;
  std::optional<ShardedMismatch> mismatch;
  /// "trace 7 'omni.matmul' at f.mlir:3:5 result #0: ..." or "N values
  /// agree".
  std::string summary() const;
};

/// Evaluates @function of `unsharded` on `inputs` (global) and of
/// `sharded` on numRanks ranks (inputs split by shardArguments), then, for
/// every op of the sharded program that carries `omni.trace` and
/// `omni.result_shardings`, reassembles each result from the ranks'
/// values and compares it with the value of the unsharded op with the same
/// trace id (the k-th evaluation with the k-th). A result sharding is an
/// #omni.sharding (replicated: every rank holds the whole value; one split
/// dimension: rank r's block k along it, cut to the unsharded size) or
/// "partial:<sum|mean|max|min>:<axis>,..." (the unsharded value is the
/// reduction of the values of the group over those axes). Floats agree
/// when |sharded - unsharded| <= tolerance * max(|unsharded|, 1) for every
/// element, integers when equal. Stops at the first mismatch in the
/// sharded program's evaluation order. Fails (a status) when either
/// program fails to evaluate or the trace attributes are malformed or name
/// ids the unsharded program lacks.
absl::StatusOr<ShardedComparison>
compareSharded(mlir::ModuleOp unsharded, mlir::ModuleOp sharded,
               llvm::StringRef function, int64_t numRanks,
               llvm::ArrayRef<HostTensor> inputs, double tolerance,
               const EvalOptions &options = {});

} // namespace omni::reference

#endif // OMNI_COMPILER_REFERENCE_EVALUATOR_H
