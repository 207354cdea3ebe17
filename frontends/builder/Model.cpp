//===- Model.cpp - configs and the model registry -------------------------===//

#include "frontends/builder/Model.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

using namespace llvm;

namespace omni::fe {

VelocityModel::~VelocityModel() = default;
ImageDecoder::~ImageDecoder() = default;

Tensor ImageDecoder::unscale(const Tensor &latents) const {
  return latents / scalingFactor() + shiftFactor();
}

Tensor VelocityModel::toTokens(const Tensor &v) const {
  int64_t b = v.dim(0), c = v.dim(1), h = v.dim(2), w = v.dim(3);
  return v.reshape({b, c, h * w}).transpose({0, 2, 1});
}

Tensor VelocityModel::fromTokens(const Tensor &tokens,
                                 const Shape &latent) const {
  int64_t b = tokens.dim(0), c = latent[0], h = latent[1], w = latent[2];
  return tokens.transpose({0, 2, 1}).reshape({b, c, h, w});
}

static Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

llvm::Error Config::override(const std::string &assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return makeError("config override '" + assignment +
                     "': expected key=value");
  std::string key = assignment.substr(0, eq);
  if (!has(key)) {
    std::string known;
    for (const auto &[k, v] : values_)
      known += (known.empty() ? "" : ", ") + k;
    return makeError("config override '" + assignment + "': unknown key '" +
                     key + "' (known: " + known + ")");
  }
  values_[key] = assignment.substr(eq + 1);
  return Error::success();
}

void Config::fail(const std::string &key, const std::string &why) const {
  if (error_.empty())
    error_ = "config key '" + key + "': " + why;
}

std::string Config::getString(const std::string &key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    fail(key, "missing");
    return "";
  }
  return it->second;
}

int64_t Config::getInt(const std::string &key) const {
  std::string s = getString(key);
  int64_t v = 0;
  if (has(key) && StringRef(s).getAsInteger(10, v))
    fail(key, "expected an integer, found '" + s + "'");
  return v;
}

double Config::getDouble(const std::string &key) const {
  std::string s = getString(key);
  double v = 0;
  if (has(key) && StringRef(s).getAsDouble(v))
    fail(key, "expected a number, found '" + s + "'");
  return v;
}

bool Config::getBool(const std::string &key) const {
  std::string s = getString(key);
  if (s == "true" || s == "1")
    return true;
  if (has(key) && s != "false" && s != "0")
    fail(key, "expected true or false, found '" + s + "'");
  return false;
}

bool Config::forEachItem(const std::string &key, const char *expected,
                         llvm::function_ref<bool(StringRef)> parse) const {
  std::string s = getString(key);
  SmallVector<StringRef> parts;
  StringRef(s).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef p : parts)
    if (!parse(p.trim())) {
      fail(key, std::string("expected comma-separated ") + expected +
                    ", found '" + s + "'");
      return false;
    }
  return true;
}

std::vector<int64_t> Config::getInts(const std::string &key) const {
  std::vector<int64_t> out;
  if (!forEachItem(key, "integers", [&](StringRef p) {
        out.push_back(0);
        return !p.getAsInteger(10, out.back());
      }))
    out.clear();
  return out;
}

std::vector<double> Config::getDoubles(const std::string &key) const {
  std::vector<double> out;
  if (!forEachItem(key, "numbers", [&](StringRef p) {
        out.push_back(0.0);
        return !p.getAsDouble(out.back());
      }))
    out.clear();
  return out;
}

std::vector<bool> Config::getBools(const std::string &key) const {
  std::vector<bool> out;
  if (!forEachItem(key, "true or false", [&](StringRef p) {
        out.push_back(p == "true" || p == "1");
        return p == "true" || p == "false" || p == "1" || p == "0";
      }))
    out.clear();
  return out;
}

llvm::Error Config::takeError() const {
  if (error_.empty())
    return Error::success();
  std::string e = std::move(error_);
  error_.clear();
  return makeError(e);
}

std::string Config::str() const {
  std::string out;
  for (const auto &[k, v] : values_)
    out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

void Registry::add(ModelEntry entry) { entries_.push_back(std::move(entry)); }

const ModelEntry *Registry::find(const std::string &name) const {
  for (const ModelEntry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

static std::string knownModels(const Registry &r, ModelKind kind) {
  std::string known;
  for (const ModelEntry &e : r.entries())
    if (e.kind == kind)
      known += (known.empty() ? "" : ", ") + e.name;
  return known;
}

llvm::Expected<Config>
Registry::config(const std::string &model, const std::string &preset,
                 const std::vector<std::string> &overrides) const {
  const ModelEntry *entry = find(model);
  if (!entry)
    return makeError("unknown model '" + model +
                     "' (known: " + knownModels(*this, ModelKind::Velocity) +
                     ", " + knownModels(*this, ModelKind::Decoder) + ")");
  const Config *base = nullptr;
  std::string names;
  for (const auto &[name, cfg] : entry->presets) {
    names += (names.empty() ? "" : ", ") + name;
    if (name == preset || (preset.empty() && !base))
      base = &cfg;
  }
  if (!base)
    return makeError("model '" + model + "' has no config '" + preset +
                     "' (known: " + names + ")");
  Config c = *base;
  for (const std::string &o : overrides)
    if (Error e = c.override(o))
      return std::move(e);
  return c;
}

llvm::Expected<std::unique_ptr<VelocityModel>>
Registry::makeVelocity(const std::string &model, const Config &config) const {
  const ModelEntry *entry = find(model);
  if (!entry || entry->kind != ModelKind::Velocity)
    return makeError("unknown velocity model '" + model + "' (known: " +
                     knownModels(*this, ModelKind::Velocity) + ")");
  return entry->makeVelocity(config);
}

llvm::Expected<std::unique_ptr<ImageDecoder>>
Registry::makeDecoder(const std::string &model, const Config &config) const {
  const ModelEntry *entry = find(model);
  if (!entry || entry->kind != ModelKind::Decoder)
    return makeError("unknown decoder model '" + model + "' (known: " +
                     knownModels(*this, ModelKind::Decoder) + ")");
  return entry->makeDecoder(config);
}

} // namespace omni::fe
