//===- Status.h - absl::Status helpers --------------------------*- C++ -*-===//
//
// The runtime reports every fallible operation through absl::Status and
// absl::StatusOr (house-style "Errors"); these macros keep the propagation
// short without hiding control flow behind exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_STATUS_H
#define OMNI_RUNTIME_BASE_STATUS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OMNI_STATUS_CONCAT_INNER(a, b) a##b
#define OMNI_STATUS_CONCAT(a, b) OMNI_STATUS_CONCAT_INNER(a, b)

/// Evaluates `expr` (an absl::Status) and returns it from the enclosing
/// function when it is not OK.
#define OMNI_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::absl::Status omni_status_ = (expr);                                      \
    if (!omni_status_.ok())                                                    \
      return omni_status_;                                                     \
  } while (false)

/// Evaluates `expr` (an absl::StatusOr<T>); returns its status from the
/// enclosing function when it is not OK, else move-assigns the value to
/// `lhs` (which may be a declaration: `OMNI_ASSIGN_OR_RETURN(auto x, f())`).
#define OMNI_ASSIGN_OR_RETURN(lhs, expr)                                       \
  OMNI_ASSIGN_OR_RETURN_IMPL(OMNI_STATUS_CONCAT(omni_statusor_, __LINE__),     \
                             lhs, expr)
#define OMNI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                             \
  auto tmp = (expr);                                                           \
  if (!tmp.ok())                                                               \
    return std::move(tmp).status();                                            \
  lhs = std::move(tmp).value()

namespace omni {

/// `status` with `prefix` prepended to its message (same code). OK stays OK.
absl::Status annotate(const absl::Status &status, absl::string_view prefix);

} // namespace omni

#endif // OMNI_RUNTIME_BASE_STATUS_H
