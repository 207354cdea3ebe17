//===- Models.cpp - the built-in model registry ---------------------------===//

#include "frontends/models/Models.h"

#include "frontends/builder/Model.h"

namespace omni::fe {

void registerBuiltinModels(Registry &registry) {
  registerDiT(registry);
  registerSD3Transformer(registry);
  registerQwenImage(registry);
  registerAutoencoderKL(registry);
  registerQwenImageVae(registry);
}

const Registry &Registry::builtin() {
  static const Registry registry = [] {
    Registry r;
    registerBuiltinModels(r);
    return r;
  }();
  return registry;
}

} // namespace omni::fe
