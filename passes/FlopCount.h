//===- FlopCount.h - The FLOPs of a program, per function and phase -*- C++
//-*-===//
//
// omnic --report-flops (docs/performance.md, "CPU speed (issue 15): where
// the time goes", "Counting FLOPs"): the arithmetic a program does, from
// its ops' types, per public function and per phase (the outermost name
// of an op's location, as step.bin's Command.phase), in five classes:
//   matmul       2 B M N K (the batch B, result M x N, contraction K)
//   attention    2 B H Sq Sk D + 2 B H Sq Sk Dv (Q K^T and P V) plus 5 per
//                score for the scaling and the softmax (max, subtract, exp,
//                sum, divide)
//   conv2d       2 N O OH OW C KH KW
//   elementwise  1 per result element of each arithmetic op (neg, abs,
//                exp, ..., add, mul, ..., compare, select); data movement
//                (broadcast, reshape, transpose, slice, concat, pad, cast,
//                iota, constant) and random numbers count 0
//   reduction    1 per operand element of each reduce
// Composite ops (before omni-decompose) count as what they decompose to,
// roughly: softmax 5, layer_norm 8, rms_norm 5, gelu 8, silu 4 per element
// and linear as its matmul. An scf.for with constant bounds multiplies its
// body by its trip count; a func.call adds its callee's count. Ops of other
// dialects count 0. The count is static: the same for every run.
//
// Thread safety: reads the module only.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_FLOPCOUNT_H
#define OMNI_PASSES_FLOPCOUNT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::omni {

enum class FlopClass { Matmul, Attention, Conv2d, Elementwise, Reduction };
constexpr int kNumFlopClasses = 5;

struct FlopCounts {
  std::array<int64_t, kNumFlopClasses> flops{};
  int64_t total() const;
  FlopCounts &operator+=(const FlopCounts &other);
};

struct FunctionFlops {
  std::string name;
  FlopCounts total;
  /// Per phase, in order of first appearance ("" for ops without one).
  std::vector<std::pair<std::string, FlopCounts>> phases;
  /// The outermost scf.for loops: their location, trip count and one
  /// trip's FLOPs.
  struct Loop {
    std::string location;
    int64_t trips;
    FlopCounts perTrip;
  };
  std::vector<Loop> loops;
};

/// The counts of every public function of `module`, in module order.
std::vector<FunctionFlops> countFlops(ModuleOp module);

/// Prints them: per function a line "@name: N FLOPs (matmul M, attention
/// A, conv2d C, elementwise E, reduction R)", then one such line per phase
/// and per outermost loop.
void printFlops(const std::vector<FunctionFlops> &functions,
                llvm::raw_ostream &os);

} // namespace mlir::omni

#endif // OMNI_PASSES_FLOPCOUNT_H
