//===- DiffusersConfig.cpp - model configs from a diffusers folder --------===//
//
// Each config.json key is one of: mapped (same name in our config, checked
// for its JSON type), defaulted (optional, with diffusers' default),
// checked (must have the one value our model builds, e.g. act_fn silu) or
// ignored (it does not change the model omnigen writes: the VAE encoder's
// keys, precision hints). Any other key is an error, so that a diffusers
// feature we do not build cannot be dropped without a word.
//
//===----------------------------------------------------------------------===//

#include "frontends/models/DiffusersConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>

using namespace omni::fe;
using namespace omni::fe::diffusers;
namespace json = llvm::json;

namespace {

llvm::Error fail(llvm::StringRef file, const llvm::Twine &message) {
  return llvm::createStringError(file + ": " + message);
}

/// The JSON text of a value, for messages.
std::string show(const json::Value &v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

llvm::Expected<json::Object> parseObject(llvm::StringRef text,
                                         llvm::StringRef file) {
  llvm::Expected<json::Value> v = json::parse(text);
  if (!v)
    return fail(file, "not valid JSON: " + llvm::toString(v.takeError()));
  json::Object *o = v->getAsObject();
  if (!o)
    return fail(file, "is " + show(*v) + ", expected a JSON object");
  return std::move(*o);
}

/// Reads and checks one config.json object's keys.
class Keys {
public:
  Keys(const json::Object &o, llvm::StringRef file) : o_(o), file_(file) {}

  /// `key` must be there (`dflt` null) or defaults to `*dflt`.
  const json::Value *get(llvm::StringRef key, llvm::Error &err,
                         const json::Value *dflt = nullptr) {
    used_.insert(key.str());
    if (const json::Value *v = o_.get(key))
      return v;
    if (!dflt && !err)
      err = fail(file_, "missing key '" + key + "'");
    return dflt;
  }
  int64_t integer(llvm::StringRef key, llvm::Error &err,
                  std::optional<int64_t> dflt = std::nullopt) {
    json::Value d = dflt ? json::Value(*dflt) : json::Value(nullptr);
    const json::Value *v = get(key, err, dflt ? &d : nullptr);
    if (!v || err)
      return 0;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i) {
      err = fail(file_,
                 "key '" + key + "' is " + show(*v) + ", expected an integer");
      return 0;
    }
    return *i;
  }
  double number(llvm::StringRef key, llvm::Error &err) {
    const json::Value *v = get(key, err);
    if (!v || err)
      return 0;
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d)) {
      err = fail(file_,
                 "key '" + key + "' is " + show(*v) + ", expected a number");
      return 0;
    }
    return *d;
  }
  bool boolean(llvm::StringRef key, llvm::Error &err, bool dflt) {
    json::Value d(dflt);
    const json::Value *v = get(key, err, &d);
    if (!v || err)
      return false;
    std::optional<bool> b = v->getAsBoolean();
    if (!b) {
      err = fail(file_, "key '" + key + "' is " + show(*v) +
                            ", expected true or false");
      return false;
    }
    return *b;
  }
  /// An array of integers (`dflt` when absent, if given).
  std::vector<int64_t>
  integers(llvm::StringRef key, llvm::Error &err,
           std::optional<std::vector<int64_t>> dflt = std::nullopt) {
    json::Value d = json::Array();
    const json::Value *v = get(key, err, dflt ? &d : nullptr);
    if (!v || err)
      return {};
    if (dflt && v == &d)
      return *dflt;
    const json::Array *a = v->getAsArray();
    std::vector<int64_t> out;
    for (size_t i = 0; a && i < a->size(); ++i) {
      std::optional<int64_t> x = (*a)[i].getAsInteger();
      if (!x) {
        a = nullptr;
        break;
      }
      out.push_back(*x);
    }
    if (!a)
      err = fail(file_, "key '" + key + "' is " + show(*v) +
                            ", expected an array of integers");
    return out;
  }
  /// A string key that must be one of `allowed`.
  void expectString(llvm::StringRef key, llvm::Error &err,
                    llvm::ArrayRef<llvm::StringRef> allowed,
                    llvm::StringRef why) {
    const json::Value *v = get(key, err);
    if (!v || err)
      return;
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s || !llvm::is_contained(allowed, *s))
      err = fail(file_, "key '" + key + "' is " + show(*v) + ", expected " +
                            (allowed.size() == 1
                                 ? "\"" + allowed[0] + "\""
                                 : "one of \"" + llvm::join(allowed, "\", \"") +
                                       "\"") +
                            " (" + why + ")");
  }
  /// Marks keys that do not change the model omnigen writes.
  void ignore(std::initializer_list<llvm::StringRef> keys) {
    for (llvm::StringRef k : keys)
      used_.insert(k.str());
  }
  /// Every key was used (or starts with '_', diffusers' bookkeeping).
  void checkNoOthers(llvm::Error &err, llvm::StringRef model) {
    if (err)
      return;
    std::vector<std::string> keys;
    for (const auto &kv : o_)
      keys.push_back(kv.first.str());
    llvm::sort(keys);
    for (const std::string &k : keys)
      if (!llvm::StringRef(k).starts_with("_") && !used_.count(k)) {
        err = fail(file_, "key '" + k + "' is not one omnigen's " + model +
                              " knows (unsupported: a model built without "
                              "it would differ)");
        return;
      }
  }

private:
  const json::Object &o_;
  std::string file_;
  std::set<std::string> used_;
};

std::string joinInts(const std::vector<int64_t> &v) {
  std::string s;
  for (int64_t x : v)
    s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

/// Shortest text that parses back to `d`.
std::string number(double d) {
  for (int precision = 6; precision <= 17; ++precision) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d)
      return buf;
  }
  return std::to_string(d);
}

llvm::Error checkClass(const json::Object &o, llvm::StringRef file,
                       llvm::StringRef expected) {
  const json::Value *v = o.get("_class_name");
  std::optional<llvm::StringRef> s = v ? v->getAsString() : std::nullopt;
  if (!s || *s != expected)
    return fail(file, "key '_class_name' is " +
                          (v ? show(*v) : std::string("missing")) +
                          ", expected \"" + expected + "\"");
  return llvm::Error::success();
}

llvm::Expected<std::string> readText(const std::string &path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError("cannot read " + path + ": " +
                                   buf.getError().message());
  return (*buf)->getBuffer().str();
}

} // namespace

llvm::Expected<Config> diffusers::sd3ConfigFromJson(llvm::StringRef text,
                                                    llvm::StringRef file,
                                                    int64_t textTokens) {
  llvm::Expected<json::Object> o = parseObject(text, file);
  if (!o)
    return o.takeError();
  if (llvm::Error e = checkClass(*o, file, "SD3Transformer2DModel"))
    return std::move(e);
  Keys k(*o, file);
  llvm::Error err = llvm::Error::success();
  Config c;
  for (const char *key :
       {"sample_size", "patch_size", "in_channels", "num_layers",
        "attention_head_dim", "num_attention_heads", "joint_attention_dim",
        "caption_projection_dim", "pooled_projection_dim",
        "pos_embed_max_size"})
    c.set(key, std::to_string(k.integer(key, err)));
  // out_channels: null (or absent) is in_channels, as in diffusers.
  json::Value none(nullptr);
  const json::Value *out = k.get("out_channels", err, &none);
  if (!err && out->kind() == json::Value::Null)
    c.set("out_channels", c.getString("in_channels"));
  else
    c.set("out_channels", std::to_string(k.integer("out_channels", err)));
  // qk_norm: null (SD3.0) or rms_norm (SD3.5); absent in SD3.0 configs.
  const json::Value *qk = k.get("qk_norm", err, &none);
  if (!err && qk->kind() == json::Value::Null)
    c.set("qk_norm", "none");
  else if (!err) {
    k.expectString("qk_norm", err, {"rms_norm"},
                   "null or rms_norm are the qk norms sd3 builds");
    c.set("qk_norm", "rms_norm");
  }
  c.set("dual_attention_layers",
        joinInts(
            k.integers("dual_attention_layers", err, std::vector<int64_t>{})));
  k.checkNoOthers(err, "sd3 (SD3Transformer2DModel)");
  if (err)
    return std::move(err);
  c.set("latent_size", c.getString("sample_size"));
  c.set("text_tokens", std::to_string(textTokens));
  return c;
}

llvm::Expected<Config> diffusers::vaeConfigFromJson(llvm::StringRef text,
                                                    llvm::StringRef file,
                                                    int64_t latentSize) {
  llvm::Expected<json::Object> o = parseObject(text, file);
  if (!o)
    return o.takeError();
  if (llvm::Error e = checkClass(*o, file, "AutoencoderKL"))
    return std::move(e);
  Keys k(*o, file);
  llvm::Error err = llvm::Error::success();
  Config c;
  c.set("latent_channels", std::to_string(k.integer("latent_channels", err)));
  c.set("out_channels", std::to_string(k.integer("out_channels", err, 3)));
  std::vector<int64_t> blocks = k.integers("block_out_channels", err);
  c.set("block_out_channels", joinInts(blocks));
  c.set("layers_per_block", std::to_string(k.integer("layers_per_block", err)));
  c.set("norm_num_groups", std::to_string(k.integer("norm_num_groups", err)));
  c.set("scaling_factor", number(k.number("scaling_factor", err)));
  // shift_factor: null (SD1/SDXL VAEs) is no shift.
  json::Value none(nullptr);
  const json::Value *shift = k.get("shift_factor", err, &none);
  c.set("shift_factor", !err && shift->kind() == json::Value::Null
                            ? std::string("0")
                            : number(k.number("shift_factor", err)));
  c.set("use_post_quant_conv",
        k.boolean("use_post_quant_conv", err, true) ? "true" : "false");
  c.set("mid_block_add_attention",
        k.boolean("mid_block_add_attention", err, true) ? "true" : "false");
  k.expectString("act_fn", err, {"silu"},
                 "the activation autoencoder_kl "
                 "builds");
  // The decoder's blocks: one UpDecoderBlock2D per block_out_channels entry.
  if (!err) {
    json::Value dflt = json::Array{"UpDecoderBlock2D"};
    const json::Value *up = k.get("up_block_types", err, &dflt);
    const json::Array *a = up ? up->getAsArray() : nullptr;
    bool ok = a && a->size() == blocks.size();
    for (size_t i = 0; ok && i < a->size(); ++i)
      ok = (*a)[i].getAsString() ==
           std::optional<llvm::StringRef>("UpDecoderBlock2D");
    if (!ok)
      err = fail(file, "key 'up_block_types' is " + show(*up) + ", expected " +
                           std::to_string(blocks.size()) +
                           " times \"UpDecoderBlock2D\" (one per "
                           "block_out_channels entry, the blocks "
                           "autoencoder_kl builds)");
  }
  // The encoder's keys (the program has only the decoder), its input size
  // and the dtype hint.
  k.ignore({"in_channels", "down_block_types", "use_quant_conv", "sample_size",
            "force_upcast", "latents_mean", "latents_std"});
  k.checkNoOthers(err, "autoencoder_kl (AutoencoderKL)");
  if (err)
    return std::move(err);
  c.set("latent_size", std::to_string(latentSize));
  return c;
}

llvm::Expected<bool> diffusers::checkModelIndex(llvm::StringRef text,
                                                llvm::StringRef file) {
  llvm::Expected<json::Object> o = parseObject(text, file);
  if (!o)
    return o.takeError();
  const json::Value *cls = o->get("_class_name");
  std::optional<llvm::StringRef> name = cls ? cls->getAsString() : std::nullopt;
  if (!name || *name != "StableDiffusion3Pipeline")
    return fail(file, "pipeline '_class_name' is " +
                          (cls ? show(*cls) : std::string("missing")) +
                          ", expected \"StableDiffusion3Pipeline\" (omnigen "
                          "--from-diffusers reads SD3 and SD3.5 folders)");
  for (auto [key, want] : {std::pair<llvm::StringRef, llvm::StringRef>{
                               "transformer", "SD3Transformer2DModel"},
                           {"vae", "AutoencoderKL"}}) {
    const json::Value *v = o->get(key);
    const json::Array *a = v ? v->getAsArray() : nullptr;
    if (!a || a->size() != 2 || (*a)[1].getAsString() != want)
      return fail(file, "key '" + key + "' is " +
                            (v ? show(*v) : std::string("missing")) +
                            ", expected [\"diffusers\", \"" + want + "\"]");
  }
  const json::Value *tok = o->get("tokenizer");
  const json::Array *a = tok ? tok->getAsArray() : nullptr;
  return a && a->size() == 2 && (*a)[1].kind() != json::Value::Null;
}

llvm::Expected<FolderConfigs> diffusers::readFolder(llvm::StringRef dir) {
  auto path = [&](llvm::StringRef a, llvm::StringRef b = "") {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, a);
    if (!b.empty())
      llvm::sys::path::append(p, b);
    return std::string(p);
  };
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError("--from-diffusers " + dir +
                                   ": no such folder, expected a diffusers "
                                   "pipeline folder with model_index.json");
  std::string indexPath = path("model_index.json");
  llvm::Expected<std::string> index = readText(indexPath);
  if (!index)
    return index.takeError();
  llvm::Expected<bool> hasTokenizer = checkModelIndex(*index, indexPath);
  if (!hasTokenizer)
    return hasTokenizer.takeError();

  FolderConfigs out;
  int64_t clip = kDefaultClipTokens;
  out.textTokensFrom = "the default " + std::to_string(clip) + " CLIP";
  std::string tokPath = path("tokenizer", "tokenizer_config.json");
  if (*hasTokenizer && llvm::sys::fs::exists(tokPath)) {
    llvm::Expected<std::string> tok = readText(tokPath);
    if (!tok)
      return tok.takeError();
    llvm::Expected<json::Object> o = parseObject(*tok, tokPath);
    if (!o)
      return o.takeError();
    const json::Value *v = o->get("model_max_length");
    std::optional<int64_t> n = v ? v->getAsInteger() : std::nullopt;
    if (!n || *n <= 0 || *n > 100000)
      return fail(tokPath, "key 'model_max_length' is " +
                               (v ? show(*v) : std::string("missing")) +
                               ", expected the CLIP prompt length (an integer "
                               "in [1, 100000])");
    clip = *n;
    out.textTokensFrom = std::to_string(clip) + " CLIP (" + tokPath + ")";
  }
  out.textTokensFrom += " + " + std::to_string(kT5Tokens) + " T5 tokens";

  std::string tPath = path("transformer", "config.json");
  llvm::Expected<std::string> t = readText(tPath);
  if (!t)
    return t.takeError();
  llvm::Expected<Config> transformer =
      sd3ConfigFromJson(*t, tPath, clip + kT5Tokens);
  if (!transformer)
    return transformer.takeError();
  out.transformer = std::move(*transformer);

  std::string vPath = path("vae", "config.json");
  llvm::Expected<std::string> v = readText(vPath);
  if (!v)
    return v.takeError();
  llvm::Expected<Config> vae =
      vaeConfigFromJson(*v, vPath, out.transformer.getInt("latent_size"));
  if (!vae)
    return vae.takeError();
  out.vae = std::move(*vae);
  return out;
}

std::vector<std::string> diffusers::assignments(const Config &config) {
  std::vector<std::string> out;
  for (const auto &[key, value] : config.values())
    out.push_back(key + "=" + value);
  return out;
}
