//===- Fixture.h - the diffusers fixtures of the model tests ----*- C++ -*-===//
//
// Test-only helpers shared by ModelsTest and VaeDecoderTest: the fixture
// weights both sides generate from parameter names (see
// bench/torch/vae_reference.py), params.txt listings and .npy files of
// frontends/models/testdata.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_MODELS_TESTING_FIXTURE_H
#define OMNI_FRONTENDS_MODELS_TESTING_FIXTURE_H

#include "frontends/builder/Builder.h"
#include "runtime/io/HostTensor.h"
#include "runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace omni::fe::testing {

inline const std::string kData = OMNI_SOURCE_DIR "/frontends/models/testdata/";

/// The fixture's weights: see bench/torch/vae_reference.py.
inline HostTensor fixtureWeights(const std::string &name, const Shape &shape) {
  uint64_t h0 = 0xCBF29CE484222325ULL;
  for (unsigned char ch : name) {
    h0 ^= ch;
    h0 *= 0x100000001B3ULL;
  }
  double fan = 1.0;
  for (size_t d = 1; d < shape.size(); ++d)
    fan *= static_cast<double>(shape[d]);
  bool isWeight = name.size() > 7 && name.substr(name.size() - 7) == ".weight";
  std::vector<double> v(numElementsOf(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t z = h0 + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 40) * 0x1p-23 - 1.0;
    v[i] = shape.size() >= 2 ? u / std::sqrt(fan)
           : isWeight        ? 1.0 + 0.25 * u
                             : 0.1 * u;
  }
  return HostTensor::fromDoubles(DType::F32, shape, std::move(v));
}

using NamedShapes = std::vector<std::pair<std::string, Shape>>;

/// `name 2x3x...` lines of a params.txt (sorted); `total` from its header.
inline NamedShapes readParams(const std::string &file,
                              int64_t *total = nullptr) {
  std::ifstream in(kData + file);
  EXPECT_TRUE(in.good()) << "cannot read " << kData + file;
  NamedShapes out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    if (line[0] == '#') {
      size_t at = line.find(" tensors, ");
      if (total && at != std::string::npos)
        *total = std::stoll(line.substr(at + 10));
      continue;
    }
    std::istringstream ls(line);
    std::string name, dims;
    ls >> name >> dims;
    Shape shape;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, 'x');)
      shape.push_back(std::stoll(d));
    out.push_back({name, shape});
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline NamedShapes namesOf(const ParamSet &params) {
  NamedShapes out;
  for (const ParamSpec &s : params.specs())
    out.push_back({s.name, s.shape});
  std::sort(out.begin(), out.end());
  return out;
}

inline HostTensor readNpy(const std::string &file) {
  absl::StatusOr<HostTensor> t = readNpyFile(kData + file);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : HostTensor();
}

} // namespace omni::fe::testing

#endif // OMNI_FRONTENDS_MODELS_TESTING_FIXTURE_H
