//===- TestUtil.h - helpers of the frontends' unit tests --------*- C++ -*-===//
//
// Header-only, for tests: running a built function through the reference
// evaluator (after verifying the module) and comparing results.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_BUILDER_TESTING_TESTUTIL_H
#define OMNI_FRONTENDS_BUILDER_TESTING_TESTUTIL_H

#include "compiler/reference/Evaluator.h"
#include "frontends/builder/Builder.h"

#include "mlir/IR/Verifier.h"

#include "absl/status/statusor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace omni::fe::testing {

/// Verifies the graph's module and evaluates its function `name`.
inline absl::StatusOr<std::vector<HostTensor>>
evaluate(Graph &g, const std::string &name, const std::vector<HostTensor> &args,
         reference::Precision precision = reference::Precision::F64) {
  if (mlir::failed(mlir::verify(g.module())))
    return absl::InvalidArgumentError("the built module does not verify");
  reference::EvalOptions options;
  options.precision = precision;
  return reference::evaluateFunction(g.module(), name, args, options);
}

/// A float32 tensor of uniform values in [lo, hi) drawn from `seed`.
inline HostTensor randomF32(const Shape &shape, uint64_t seed, double lo = -1.0,
                            double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElementsOf(shape));
  for (double &x : v)
    x = dist(rng);
  return HostTensor::fromDoubles(DType::F32, shape, std::move(v));
}

/// max |got - want| / max(max |want|, tiny): the error relative to the
/// tensor's scale (elementwise relative errors blow up near zero).
inline double relativeError(const HostTensor &got,
                            const std::vector<double> &want) {
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got.doubleAt(i) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

inline std::vector<double> valuesOf(const HostTensor &t) {
  std::vector<double> out(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[i] = t.doubleAt(i);
  return out;
}

} // namespace omni::fe::testing

#endif // OMNI_FRONTENDS_BUILDER_TESTING_TESTUTIL_H
