//===- TestHelpers.h - Shared assertions for OmniFlowGrpo tests -*- C++ -*-===//
//
// Test-only helpers: relative-tolerance comparison (docs/flowgrpo-math.md
// section 8 states its numbers to about 1e-6 relative) and a check that an
// error follows the house style for user-facing messages (InvalidArgument, one
// lowercase line, no trailing period, naming what was wrong).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_MATH_FLOWGRPO_TESTING_TESTHELPERS_H
#define OMNI_MATH_FLOWGRPO_TESTING_TESTHELPERS_H

#include "absl/status/status.h"

#include "gtest/gtest.h"

#include <cctype>
#include <cmath>
#include <string>

namespace omni::flowgrpo::testing {

/// |actual - expected| <= rel * |expected|.
inline ::testing::AssertionResult relNear(double actual, double expected,
                                          double rel) {
  double diff = std::fabs(actual - expected);
  if (diff <= rel * std::fabs(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "actual " << actual << " vs expected " << expected
         << ": relative difference " << diff / std::fabs(expected)
         << " exceeds " << rel;
}

/// For a number printed in docs/flowgrpo-math.md section 8 with 7 decimals:
/// within 1e-6 relative, or within half a unit of the 7th decimal when the
/// value is so small that its printed digits carry less than 1e-6 relative
/// precision (mu[3] = -0.0099677 of the one-step example).
inline ::testing::AssertionResult docNear(double actual, double expected) {
  if (std::fabs(actual - expected) <= 5e-8)
    return ::testing::AssertionSuccess();
  return relNear(actual, expected, 1e-6);
}

/// The status is InvalidArgument with a one-line lowercase message without
/// a trailing period that contains `needle`.
inline ::testing::AssertionResult isUserError(const absl::Status &status,
                                              const std::string &needle) {
  if (status.code() != absl::StatusCode::kInvalidArgument)
    return ::testing::AssertionFailure()
           << "expected InvalidArgument but got " << status;
  std::string message(status.message());
  if (message.empty() || !std::islower(static_cast<unsigned char>(message[0])))
    return ::testing::AssertionFailure()
           << "message must start lowercase: '" << message << "'";
  if (message.find('\n') != std::string::npos || message.back() == '.')
    return ::testing::AssertionFailure()
           << "message must be one line without a trailing period: '" << message
           << "'";
  if (message.find(needle) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message '" << message << "' does not mention '" << needle << "'";
  return ::testing::AssertionSuccess();
}

} // namespace omni::flowgrpo::testing

#endif // OMNI_MATH_FLOWGRPO_TESTING_TESTHELPERS_H
