//===- SamplePrograms.h - step.bin files for omnirun's tests ----*- C++ -*-===//
//
// The programs OmniRunTest runs in-process and omnirun-testgen writes for
// the lit tests in test/runtime (until omnic emits step.bin). Each mirrors
// a function the reference evaluator can run, so lit can compare the two.
// Test-only.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_TESTING_SAMPLEPROGRAMS_H
#define OMNI_RUNTIME_OMNIRUN_TESTING_SAMPLEPROGRAMS_H

#include "runtime/loader/testing/StepBuilder.h"

#include <string>

namespace omni::omnirun::samples {

namespace sd = omni::step;
using omni::testing::StepBuilder;

/// add(x: 4xf32, y: 4xf32) -> 4xf32 with the embedded test kernel.
inline std::string add(const std::string &kernelsSo) {
  StepBuilder b;
  StepBuilder::ExecutableSpec e;
  e.name = "test_kernels";
  e.target = "+sse2";
  e.data = omni::testing::readBinaryFile(kernelsSo);
  e.kernels = {"omni_test_add_f32"};
  uint32_t exe = b.executable(e);
  uint32_t x = b.argument(sd::DType::F32, {4}, 0, "x");
  uint32_t y = b.argument(sd::DType::F32, {4}, 1, "y");
  uint32_t z = b.arena(sd::DType::F32, {4}, "z");
  b.function("add", {x, y}, {z}, {b.dispatch(exe, 0, 4, {x, y}, {z})});
  return b.finish();
}

/// matmul(a: 2x3xf32, b: 3x2xf32) -> 2x2xf32, and
/// both(a: 2x3xf64) -> (2x3xf64, i64): a copy of a and a constant 7;
/// one state slot "w" (2xf32).
inline std::string matmul() {
  StepBuilder b;
  uint32_t a = b.argument(sd::DType::F32, {2, 3}, 0, "a");
  uint32_t bb = b.argument(sd::DType::F32, {3, 2}, 1, "b");
  uint32_t c = b.arena(sd::DType::F32, {2, 2}, "c");
  b.stateTensor("w", sd::DType::F32, {2});
  b.function("matmul", {a, bb}, {c},
             {b.library(sd::Library::Matmul, {a, bb}, {c}, {0, 0})});
  uint32_t a64 = b.argument(sd::DType::F64, {2, 3}, 0, "a");
  uint32_t copy = b.arena(sd::DType::F64, {2, 3}, "copy");
  uint32_t seven = b.constant(sd::DType::I64, {},
                              omni::testing::bytesOf<int64_t>({7}), "seven");
  b.function("both", {a64}, {copy, seven}, {b.copy(a64, copy)});
  return b.finish();
}

/// noise(key: i64, counter: i64) -> 4x4xf32: random_normal at offset 0,
/// as test/runtime/omnirun-rng.mlir for the reference evaluator.
inline std::string rng() {
  StepBuilder b;
  uint32_t key = b.argument(sd::DType::I64, {}, 0, "key");
  uint32_t counter = b.argument(sd::DType::I64, {}, 1, "counter");
  uint32_t zero = b.constant(sd::DType::I64, {},
                             omni::testing::bytesOf<int64_t>({0}), "zero");
  uint32_t out = b.arena(sd::DType::F32, {4, 4}, "noise");
  b.function("noise", {key, counter}, {out},
             {b.random(sd::Distribution::Normal, key, counter, zero, out)});
  return b.finish();
}

/// matmul() compiled "for cuda": the same functions with Target.kind
/// "cuda" (library calls and copies only, no executable), for omnirun's
/// --gpus checks (test/runtime/gpu-missing.test).
inline std::string cudaMatmul() {
  StepBuilder b;
  b.targetKind = "cuda";
  uint32_t a = b.argument(sd::DType::F32, {2, 3}, 0, "a");
  uint32_t bb = b.argument(sd::DType::F32, {3, 2}, 1, "b");
  uint32_t c = b.arena(sd::DType::F32, {2, 2}, "c");
  b.function("matmul", {a, bb}, {c},
             {b.library(sd::Library::Matmul, {a, bb}, {c}, {0, 0})});
  return b.finish();
}

/// A file the loader rejects: an operand index past the tensor table.
inline std::string badOperand() {
  StepBuilder b;
  uint32_t x = b.arena(sd::DType::F32, {4});
  b.function("f", {}, {}, {b.copy(x, 57)});
  return b.finish();
}

} // namespace omni::omnirun::samples

#endif // OMNI_RUNTIME_OMNIRUN_TESTING_SAMPLEPROGRAMS_H
