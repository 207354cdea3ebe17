//===- omnirun.cpp - Run a compiled omni program ----------------*- C++ -*-===//
//
// The omnirun executable: forwards its arguments to omni::omnirun::run
// (OmniRun.h), which does everything, so tests can run the tool in-process.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/OmniRun.h"

#include <iostream>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return omni::omnirun::run(args, std::cout, std::cerr);
}
