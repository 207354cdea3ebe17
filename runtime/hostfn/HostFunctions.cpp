//===- HostFunctions.cpp - Functions omni.host_call can name ----*- C++ -*-===//

#include "runtime/hostfn/HostFunctions.h"

namespace omni {

void HostFunctionRegistry::add(std::string name, HostFunction fn,
                               bool concurrent) {
  functions_[std::move(name)] = Entry{std::move(fn), concurrent};
}

const HostFunction *
HostFunctionRegistry::lookup(const std::string &name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second.fn;
}

bool HostFunctionRegistry::isConcurrent(const std::string &name) const {
  auto it = functions_.find(name);
  return it != functions_.end() && it->second.concurrent;
}

std::vector<std::string> HostFunctionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &entry : functions_)
    out.push_back(entry.first);
  return out;
}

} // namespace omni
