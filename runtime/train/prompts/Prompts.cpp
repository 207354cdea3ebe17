//===- Prompts.cpp - The prompt set a training run draws from -------------===//

#include "runtime/train/prompts/Prompts.h"

#include "runtime/flowgrpo/Philox.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/checkpoint/Safetensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <cassert>

namespace omni::train {
namespace {

/// "a, b, c" (at most 8 names, then ", ...").
std::string listNames(const std::vector<checkpoint::NamedTensor> &tensors) {
  if (tensors.empty())
    return "none";
  std::vector<std::string> names;
  for (const checkpoint::NamedTensor &t : tensors) {
    if (names.size() == 8) {
      names.push_back("...");
      break;
    }
    names.push_back(t.name);
  }
  return absl::StrJoin(names, ", ");
}

/// Checks tensor `name` of the file against [N, rowShape...] f32 and
/// returns its elements; `count` is N.
absl::StatusOr<std::vector<float>>
takeTensor(const std::string &path,
           const std::vector<checkpoint::NamedTensor> &tensors,
           const std::string &name, const std::vector<int64_t> &rowShape,
           const std::string &dims, const PromptRequest &request,
           int64_t &count) {
  const HostTensor *found = nullptr;
  for (const checkpoint::NamedTensor &t : tensors)
    if (t.name == name)
      found = &t.tensor;
  std::string expected = absl::StrCat("tensor<N", rowShape.empty() ? "" : "x",
                                      shapeString(rowShape), "xf32>");
  std::string why =
      absl::StrCat("(", dims, " from @", request.function, "'s ", name, ")");
  if (!found)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no tensor '", name, "', expected ", expected, " ",
                     why, "; found tensors: ", listNames(tensors)));
  if (found->dtype() != DType::F32)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor '", name, "' is ", found->typeString(),
                     ", expected ", expected, " (dtype f32)"));
  const std::vector<int64_t> &shape = found->shape();
  bool match = shape.size() == rowShape.size() + 1 &&
               std::equal(rowShape.begin(), rowShape.end(), shape.begin() + 1);
  if (!match)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor '", name, "' is ", found->typeString(),
                     ", expected ", expected, " ", why));
  if (shape[0] < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor '", name, "' is ", found->typeString(),
                     ", expected at least one prompt (N >= 1)"));
  count = shape[0];
  std::vector<float> values(found->floats().begin(), found->floats().end());
  return values;
}

/// A text mask's values (rows of `tokens`) hold only 0 and 1 and every row
/// at least one 1.
absl::Status checkMask(const std::string &path, const std::string &name,
                       const std::vector<float> &values, int64_t tokens) {
  for (size_t r = 0; r * tokens < values.size(); ++r) {
    bool any = false;
    for (int64_t j = 0; j < tokens; ++j) {
      float v = values[r * tokens + j];
      if (v != 0.f && v != 1.f)
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", name, "' element [", r, ", ", j,
                         "] is ", v, ", expected 0 (padding) or 1 (a token)"));
      any = any || v == 1.f;
    }
    if (!any)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "' row ", r,
                       " has no valid token (all 0), expected at least one 1"));
  }
  return absl::OkStatus();
}

bool hasTensor(const std::vector<checkpoint::NamedTensor> &tensors,
               const std::string &name) {
  for (const checkpoint::NamedTensor &t : tensors)
    if (t.name == name)
      return true;
  return false;
}

/// Metadata "prompts": a JSON list of `count` strings.
absl::StatusOr<std::vector<std::string>>
parseTexts(const std::string &path, const std::string &text, int64_t count) {
  namespace json = checkpoint::json;
  json::JsonValue value;
  std::string error;
  if (!json::parseJson(text, value, error))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": metadata 'prompts' is not JSON (", error,
                     "), expected a list of ", count, " strings"));
  if (value.kind != json::JsonValue::Kind::Array)
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": metadata 'prompts' is ", json::kindName(value.kind),
        ", expected a list of ", count, " strings"));
  std::vector<std::string> texts;
  for (size_t i = 0; i < value.elements.size(); ++i) {
    const json::JsonValue &e = value.elements[i];
    if (e.kind != json::JsonValue::Kind::String)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": metadata 'prompts' element ", i, " is ",
                       json::kindName(e.kind), ", expected a string"));
    texts.push_back(e.text);
  }
  if (static_cast<int64_t>(texts.size()) != count)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": metadata 'prompts' lists ", texts.size(),
                     " texts, expected ", count, " (one per prompt)"));
  return texts;
}

} // namespace

absl::StatusOr<PromptSet> PromptSet::load(const std::string &path,
                                          const PromptRequest &request) {
  if (!request.embeds && !request.pooled)
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompts ", path, ": @", request.function,
        " takes no prompt_embeds or pooled_prompt_embeds input, so it uses "
        "no prompts"));
  absl::StatusOr<checkpoint::SafetensorsContents> contents =
      checkpoint::readSafetensorsWithMetadata(path);
  if (!contents.ok())
    return contents.status();
  const std::vector<checkpoint::NamedTensor> *tensors = &contents->tensors;
  PromptSet set;
  set.request_ = request;
  set.source_ = path;
  int64_t embedsCount = 0, pooledCount = 0;
  if (request.embeds) {
    absl::StatusOr<std::vector<float>> v = takeTensor(
        path, *tensors, "prompt_embeds", {request.tokens, request.dim},
        absl::StrCat("L = ", request.tokens, ", D = ", request.dim), request,
        embedsCount);
    if (!v.ok())
      return v.status();
    set.embeds_ = std::move(*v);
    set.count_ = embedsCount;
  }
  if (request.pooled) {
    absl::StatusOr<std::vector<float>> v = takeTensor(
        path, *tensors, "pooled_prompt_embeds", {request.pooledDim},
        absl::StrCat("Dp = ", request.pooledDim), request, pooledCount);
    if (!v.ok())
      return v.status();
    set.pooled_ = std::move(*v);
    if (request.embeds && pooledCount != embedsCount)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor 'pooled_prompt_embeds' holds ", pooledCount,
          " prompts, expected ", embedsCount, " as 'prompt_embeds' holds"));
    set.count_ = pooledCount;
  }
  // CFG's unconditional branch: the file's negatives when it has any (then
  // every one the step takes), else zeros.
  const bool fileHasNegatives =
      hasTensor(*tensors, "negative_prompt_embeds") ||
      hasTensor(*tensors, "negative_pooled_prompt_embeds");
  if ((request.negativeEmbeds || request.negativePooled) && fileHasNegatives) {
    set.hasNegatives_ = true;
    auto takeOne = [&](const std::string &name, std::vector<int64_t> row,
                       std::string dims) -> absl::StatusOr<std::vector<float>> {
      int64_t n = 0;
      absl::StatusOr<std::vector<float>> v =
          takeTensor(path, *tensors, name, row, dims, request, n);
      if (v.ok() && n != 1)
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor '", name, "' holds ", n,
            " prompts, expected 1 (the negative prompt, for every sample)"));
      return v;
    };
    if (request.negativeEmbeds) {
      absl::StatusOr<std::vector<float>> v =
          takeOne("negative_prompt_embeds", {request.tokens, request.dim},
                  absl::StrCat("L = ", request.tokens, ", D = ", request.dim));
      if (!v.ok())
        return v.status();
      set.negativeEmbeds_ = std::move(*v);
    }
    if (request.negativePooled) {
      absl::StatusOr<std::vector<float>> v =
          takeOne("negative_pooled_prompt_embeds", {request.pooledDim},
                  absl::StrCat("Dp = ", request.pooledDim));
      if (!v.ok())
        return v.status();
      set.negativePooled_ = std::move(*v);
    }
  }
  // The text masks: the file's when it has them, else all ones.
  if (request.mask && hasTensor(*tensors, "prompt_embeds_mask")) {
    int64_t n = 0;
    absl::StatusOr<std::vector<float>> v =
        takeTensor(path, *tensors, "prompt_embeds_mask", {request.tokens},
                   absl::StrCat("L = ", request.tokens), request, n);
    if (!v.ok())
      return v.status();
    if (n != set.count_)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor 'prompt_embeds_mask' holds ", n,
          " prompts, expected ", set.count_, " as 'prompt_embeds' holds"));
    if (absl::Status ok =
            checkMask(path, "prompt_embeds_mask", *v, request.tokens);
        !ok.ok())
      return ok;
    set.mask_ = std::move(*v);
  }
  if (request.negativeMask && set.hasNegatives_ &&
      hasTensor(*tensors, "negative_prompt_embeds_mask")) {
    int64_t n = 0;
    absl::StatusOr<std::vector<float>> v = takeTensor(
        path, *tensors, "negative_prompt_embeds_mask", {request.tokens},
        absl::StrCat("L = ", request.tokens), request, n);
    if (!v.ok())
      return v.status();
    if (n != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor 'negative_prompt_embeds_mask' holds ", n,
          " prompts, expected 1 (the negative prompt, for every sample)"));
    if (absl::Status ok =
            checkMask(path, "negative_prompt_embeds_mask", *v, request.tokens);
        !ok.ok())
      return ok;
    set.negativeMask_ = std::move(*v);
  }
  const std::map<std::string, std::string> &metadata = contents->metadata;
  if (auto it = metadata.find("prompts"); it != metadata.end()) {
    absl::StatusOr<std::vector<std::string>> texts =
        parseTexts(path, it->second, set.count_);
    if (!texts.ok())
      return texts.status();
    set.texts_ = std::move(*texts);
  }
  if (auto it = metadata.find("negative_prompt"); it != metadata.end())
    set.negativeText_ = it->second;
  return set;
}

PromptSet PromptSet::synthetic(const PromptRequest &request) {
  PromptSet set;
  set.request_ = request;
  set.source_ = "synthetic";
  set.count_ = kSyntheticPrompts;
  if (request.embeds) {
    set.embeds_.resize(kSyntheticPrompts * request.tokens * request.dim);
    flowgrpo::philoxNormal(kSyntheticPromptKey, 0, 0, set.embeds_.data(),
                           static_cast<int64_t>(set.embeds_.size()));
  }
  if (request.pooled) {
    set.pooled_.resize(kSyntheticPrompts * request.pooledDim);
    flowgrpo::philoxNormal(kSyntheticPromptKey, 1, 0, set.pooled_.data(),
                           static_cast<int64_t>(set.pooled_.size()));
  }
  return set;
}

std::vector<int64_t> PromptSet::indices(int64_t iteration) const {
  assert(iteration >= 0 && count_ > 0);
  const int64_t p = request_.perIteration;
  // (i*P + j) mod Np without overflowing i*P.
  int64_t base = (iteration % count_) * (p % count_) % count_;
  std::vector<int64_t> out;
  for (int64_t j = 0; j < p; ++j)
    out.push_back((base + j % count_) % count_);
  return out;
}

HostTensor PromptSet::gather(const std::vector<float> &rows, int64_t rowSize,
                             std::vector<int64_t> shape,
                             int64_t iteration) const {
  HostTensor out(DType::F32, std::move(shape));
  absl::Span<double> dst = out.floats();
  std::vector<int64_t> which = indices(iteration);
  for (size_t j = 0; j < which.size(); ++j)
    for (int64_t e = 0; e < rowSize; ++e)
      dst[j * rowSize + e] = rows[which[j] * rowSize + e];
  return out;
}

HostTensor PromptSet::embeds(int64_t iteration) const {
  assert(request_.embeds);
  return gather(embeds_, request_.tokens * request_.dim,
                {request_.perIteration, request_.tokens, request_.dim},
                iteration);
}

HostTensor PromptSet::pooled(int64_t iteration) const {
  assert(request_.pooled);
  return gather(pooled_, request_.pooledDim,
                {request_.perIteration, request_.pooledDim}, iteration);
}

namespace {

/// `values` as an f32 tensor of `shape`, or zeros when `values` is empty.
HostTensor rowOrZeros(const std::vector<float> &values,
                      std::vector<int64_t> shape) {
  HostTensor out(DType::F32, std::move(shape));
  absl::Span<double> dst = out.floats();
  for (size_t e = 0; e < values.size() && e < dst.size(); ++e)
    dst[e] = values[e];
  return out;
}

} // namespace

HostTensor PromptSet::negativeEmbeds() const {
  assert(request_.negativeEmbeds);
  return rowOrZeros(negativeEmbeds_, {1, request_.tokens, request_.dim});
}

HostTensor PromptSet::negativePooled() const {
  assert(request_.negativePooled);
  return rowOrZeros(negativePooled_, {1, request_.pooledDim});
}

HostTensor PromptSet::mask(int64_t iteration) const {
  assert(request_.mask);
  std::vector<int64_t> shape{request_.perIteration, request_.tokens};
  if (mask_.empty())
    return HostTensor::fromDoubles(
        DType::F32, shape,
        std::vector<double>(request_.perIteration * request_.tokens, 1.0));
  return gather(mask_, request_.tokens, shape, iteration);
}

HostTensor PromptSet::negativeMask() const {
  assert(request_.negativeMask);
  if (negativeMask_.empty())
    return HostTensor::fromDoubles(DType::F32, {1, request_.tokens},
                                   std::vector<double>(request_.tokens, 1.0));
  return rowOrZeros(negativeMask_, {1, request_.tokens});
}

} // namespace omni::train
