//===- Models.h - registration of the built-in models -----------*- C++ -*-===//
//
// One function per model file; Models.cpp calls them all (explicit calls,
// not static initializers, so static linking cannot drop a model).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_MODELS_MODELS_H
#define OMNI_FRONTENDS_MODELS_MODELS_H

namespace omni::fe {
class Registry;
void registerDiT(Registry &registry);
void registerSD3Transformer(Registry &registry);
void registerQwenImage(Registry &registry);
void registerAutoencoderKL(Registry &registry);
void registerQwenImageVae(Registry &registry);
} // namespace omni::fe

#endif // OMNI_FRONTENDS_MODELS_MODELS_H
