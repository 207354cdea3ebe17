//===- TestGen.cpp - Write omnirun's sample step.bin files ------*- C++ -*-===//
//
// `omnirun-testgen <add|matmul|rng|bad> <out.bin>` writes one of the sample
// programs of SamplePrograms.h, for the lit tests in test/runtime;
// `sharded1|sharded2|mesh2` the training programs of
// runtime/train/driver/testing/RankPrograms.h for test/train/ranks.test.
// Test-only.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/testing/SamplePrograms.h"
#include "runtime/train/driver/testing/RankPrograms.h"

#include <fstream>
#include <iostream>

int main(int argc, char **argv) {
  namespace samples = omni::omnirun::samples;
  if (argc != 3) {
    std::cerr << "usage: omnirun-testgen "
                 "<add|matmul|cuda-matmul|rng|bad|sharded1|sharded2|mesh2> "
                 "<out.bin>\n";
    return 1;
  }
  std::string name = argv[1], bytes;
  if (name == "add")
    bytes = samples::add(OMNI_TEST_KERNELS_SO);
  else if (name == "matmul")
    bytes = samples::matmul();
  else if (name == "cuda-matmul")
    bytes = samples::cudaMatmul();
  else if (name == "rng")
    bytes = samples::rng();
  else if (name == "bad")
    bytes = samples::badOperand();
  else if (name == "sharded1" || name == "sharded2")
    bytes = omni::train::testing::shardedProgramBytes(
        OMNI_TEST_KERNELS_SO, name == "sharded1" ? 1 : 2);
  else if (name == "mesh2")
    bytes = omni::train::testing::rankProgramBytes(OMNI_TEST_KERNELS_SO, 2);
  else {
    std::cerr << "omnirun-testgen: unknown sample '" << name << "'\n";
    return 1;
  }
  std::ofstream out(argv[2], std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::cerr << "omnirun-testgen: cannot write " << argv[2] << "\n";
    return 1;
  }
  return 0;
}
