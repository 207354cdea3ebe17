//===- main.cpp - An out-of-tree program linking the installed runtime ----===//
//
// The install-consumer test's program: includes the installed headers by
// their runtime/... paths, links omni::OmniExecutor and omni::OmniHalDrivers,
// loads the step.bin given on the command line (affine.mlir compiled by the
// installed omnic), runs @f on the cpu device and checks the exact result.
// Prints one line and exits 0 when it matches, 1 (with the reason) when not.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/io/TensorText.h"
#include "runtime/loader/Program.h"

#include <iostream>
#include <string>
#include <vector>

namespace {

int fail(const std::string &message) {
  std::cerr << "consumer: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    return fail("usage: consumer <step.bin>");
  auto program = omni::loader::Program::loadFile(argv[1]);
  if (!program.ok())
    return fail(std::string(program.status().message()));

  omni::hal::DeviceOptions deviceOptions;
  deviceOptions.threads = 1;
  auto device = omni::hal::builtinDrivers().createDevice("cpu", deviceOptions);
  if (!device.ok())
    return fail(std::string(device.status().message()));
  auto executor = omni::executor::Executor::create(*program, **device);
  if (!executor.ok())
    return fail(std::string(executor.status().message()));

  std::vector<omni::HostTensor> inputs;
  for (const char *text : {"2x3xf32=1,2,3,4,5,6", "3x2xf32=1,0,2,1,-1,3"}) {
    auto input = omni::parseTensorArgument(text);
    if (!input.ok())
      return fail(std::string(input.status().message()));
    inputs.push_back(*input);
  }
  auto results = omni::executor::runHostTensors(**executor, "f", inputs);
  if (!results.ok())
    return fail(std::string(results.status().message()));
  if (results->size() != 1)
    return fail("@f returned " + std::to_string(results->size()) +
                " results, expected 1");

  // [[1,2,3],[4,5,6]] x [[1,0],[2,1],[-1,3]] = [[2,11],[8,23]]; 2m + 1.
  const std::string expected = "tensor<2x2xf32>=[[5 23][17 47]]";
  std::string found = omni::formatTensor((*results)[0], 9);
  if (found != expected)
    return fail("@f = " + found + ", expected " + expected);
  std::cout << "consumer: @f = " << found << " as expected\n";
  return 0;
}
