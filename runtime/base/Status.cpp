//===- Status.cpp - absl::Status helpers ------------------------*- C++ -*-===//

#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"

namespace omni {

absl::Status annotate(const absl::Status &status, absl::string_view prefix) {
  if (status.ok())
    return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

} // namespace omni
