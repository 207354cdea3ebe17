//===- StepJson.cpp - step.bin as readable JSON ---------------------------===//

#include "compiler/driver/StepJson.h"

#include "compiler/driver/StepSchemaText.h"

#include "flatbuffers/idl.h"
#include "flatbuffers/util.h"

using namespace mlir;

/// Replaces every `"<field>": [ ... ]` array by `"<field>": "<N bytes>"`:
/// kernels and constants ("data") and a cubin's PTX ("ptx") are bytes that
/// would drown the structure.
static std::string summarizeBytes(const std::string &json,
                                  const std::string &field) {
  std::string out;
  const std::string key = "\"" + field + "\": [";
  size_t pos = 0;
  while (true) {
    size_t at = json.find(key, pos);
    if (at == std::string::npos)
      break;
    size_t end = json.find(']', at);
    if (end == std::string::npos)
      break;
    size_t count = 0;
    bool any = false;
    for (size_t i = at + key.size(); i < end; ++i) {
      if (json[i] == ',')
        ++count;
      if (isdigit(static_cast<unsigned char>(json[i])))
        any = true;
    }
    out += json.substr(pos, at - pos);
    out += "\"" + field + "\": \"<" + std::to_string(any ? count + 1 : 0) +
           " bytes>\"";
    pos = end + 1;
  }
  out += json.substr(pos);
  return out;
}

FailureOr<std::string>
mlir::omni::stepBinToJson(const std::vector<uint8_t> &bytes,
                          std::string &error) {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.output_default_scalars_in_json = true;
  opts.indent_step = 2;
  flatbuffers::Parser parser(opts);
  if (!parser.Parse(kStepSchemaText)) {
    error = "internal error: the embedded step.fbs does not parse: " +
            parser.error_;
    return failure();
  }
  std::string json;
  if (!GenerateText(parser, bytes.data(), &json)) {
    error = "cannot print step.bin as JSON";
    return failure();
  }
  return summarizeBytes(summarizeBytes(json, "data"), "ptx");
}
