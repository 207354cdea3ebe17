//===- DType.cpp - Element types of omni tensors ----------------*- C++ -*-===//

#include "runtime/io/DType.h"

namespace omni {

absl::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I1:
    return "i1";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::optional<DType> parseDType(absl::string_view name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I1,
                  DType::I32, DType::I64})
    if (dtypeName(d) == name)
      return d;
  return std::nullopt;
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I1:
    return 1;
  }
  return 1;
}

bool isFloatDType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

unsigned intBitWidth(DType dtype) {
  switch (dtype) {
  case DType::I1:
    return 1;
  case DType::I32:
    return 32;
  case DType::I64:
    return 64;
  default:
    return 0;
  }
}

} // namespace omni
