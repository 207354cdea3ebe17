//===- Npy.cpp - NumPy .npy files -------------------------------*- C++ -*-===//
//
// The .npy layout: the magic "\x93NUMPY", a major and minor version byte, the
// header length (u16 for 1.0, u32 for 2.0), and a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a newline; then the raw little-endian elements. The header is
// parsed with a small recursive-descent reader for exactly that dict rather
// than with string searches, so malformed headers are reported, not
// misread.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Npy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <fstream>
#include <limits>
#include <sstream>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "runtime/io/Npy.cpp assumes a little-endian host"
#endif

namespace omni {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

/// A printable rendering of raw bytes for error messages.
std::string escapeBytes(absl::string_view bytes, size_t limit = 16) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
      out += static_cast<char>(c);
    else
      out += absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2));
  }
  if (bytes.size() > limit)
    out += "...";
  return absl::StrCat("\"", out, "\"");
}

absl::Status headerError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("npy header: ", what));
}

/// One supported NumPy dtype.
struct NpyDType {
  absl::string_view descr;
  DType dtype;
  size_t itemSize;
};

constexpr NpyDType kDTypes[] = {
    {"<f4", DType::F32, 4}, {"<f8", DType::F64, 8}, {"<f2", DType::F16, 2},
    {"<i4", DType::I32, 4}, {"<i8", DType::I64, 8}, {"|b1", DType::I1, 1},
};

std::string supportedDescrs() {
  std::vector<std::string> names;
  for (const NpyDType &d : kDTypes)
    names.push_back(absl::StrCat("'", d.descr, "'"));
  return absl::StrJoin(names, ", ");
}

/// The parsed header dict.
struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Recursive-descent reader of the header's Python dict literal.
class HeaderReader {
public:
  explicit HeaderReader(absl::string_view text) : text(text) {}

  absl::StatusOr<Header> read() {
    Header header;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return expected("'{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      absl::StatusOr<std::string> key = readString();
      if (!key.ok())
        return key.status();
      skipSpace();
      if (!consume(':'))
        return expected("':'");
      skipSpace();
      if (*key == "descr") {
        absl::StatusOr<std::string> descr = readString();
        if (!descr.ok())
          return descr.status();
        header.descr = *descr;
        haveDescr = true;
      } else if (*key == "fortran_order") {
        if (consumeWord("True"))
          header.fortranOrder = true;
        else if (consumeWord("False"))
          header.fortranOrder = false;
        else
          return expected("True or False for 'fortran_order'");
        haveOrder = true;
      } else if (*key == "shape") {
        absl::Status status = readShape(header.shape);
        if (!status.ok())
          return status;
        haveShape = true;
      } else {
        return headerError(
            absl::StrCat("unexpected key '", *key,
                         "': expected 'descr', 'fortran_order' or 'shape'"));
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return expected("',' or '}'");
    }
    skipSpace();
    if (pos != text.size())
      return expected("the end of the header after '}'");
    if (!haveDescr || !haveOrder || !haveShape)
      return headerError(
          absl::StrCat("missing key '",
                       !haveDescr   ? "descr"
                       : !haveOrder ? "fortran_order"
                                    : "shape",
                       "': expected 'descr', 'fortran_order' and 'shape'"));
    return header;
  }

private:
  absl::Status expected(absl::string_view what) {
    return headerError(
        absl::StrCat("expected ", what, " at offset ", pos, ", found ",
                     pos < text.size() ? escapeBytes(text.substr(pos), 12)
                                       : std::string("the end of the header")));
  }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n'))
      ++pos;
  }

  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  bool consumeWord(absl::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }

  absl::StatusOr<std::string> readString() {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return expected("a quoted string");
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == absl::string_view::npos)
      return headerError("unterminated string");
    std::string s(text.substr(pos, end - pos));
    pos = end + 1;
    return s;
  }

  absl::Status readShape(std::vector<int64_t> &shape) {
    if (!consume('('))
      return expected("'(' starting 'shape'");
    while (true) {
      skipSpace();
      if (consume(')'))
        return absl::OkStatus();
      size_t start = pos;
      int64_t value = 0;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        int digit = text[pos] - '0';
        if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
          return headerError("shape dimension overflows int64");
        value = value * 10 + digit;
        ++pos;
      }
      if (pos == start)
        return expected("a non-negative integer dimension");
      consume('L'); // Python 2 long suffix
      shape.push_back(value);
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume(')'))
        return absl::OkStatus();
      return expected("',' or ')' in 'shape'");
    }
  }

  absl::string_view text;
  size_t pos = 0;
};

uint32_t readLittleEndian(absl::string_view bytes, size_t offset,
                          size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |=
        static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i]))
        << (8 * i);
  return value;
}

std::string shapeTuple(absl::Span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += absl::StrCat(shape[i], shape.size() == 1 ? "," : "",
                      i + 1 < shape.size() ? ", " : "");
  return s + ")";
}

} // namespace

absl::StatusOr<HostTensor> parseNpy(absl::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic)
    return absl::InvalidArgumentError(absl::StrCat(
        "not a .npy file: expected the magic string ", escapeBytes(kMagic),
        ", found ", escapeBytes(bytes.substr(0, kMagic.size()))));
  if (bytes.size() < kMagic.size() + 2)
    return absl::InvalidArgumentError(
        absl::StrCat("truncated .npy file: expected a version after the "
                     "magic string, found ",
                     bytes.size(), " bytes in all"));
  int major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy format version ", major, ".", minor,
                     ": expected 1.0 or 2.0"));
  size_t lengthWidth = major == 1 ? 2 : 4;
  size_t prefix = 8 + lengthWidth;
  if (bytes.size() < prefix)
    return absl::InvalidArgumentError(
        absl::StrCat("truncated .npy file: expected at least ", prefix,
                     " bytes for the header length, found ", bytes.size()));
  size_t headerLength = readLittleEndian(bytes, 8, lengthWidth);
  if (bytes.size() - prefix < headerLength)
    return absl::InvalidArgumentError(
        absl::StrCat("truncated .npy header: expected ", headerLength,
                     " bytes, found ", bytes.size() - prefix));
  absl::StatusOr<Header> header =
      HeaderReader(bytes.substr(prefix, headerLength)).read();
  if (!header.ok())
    return header.status();

  const NpyDType *dtype = nullptr;
  for (const NpyDType &d : kDTypes)
    if (d.descr == header->descr)
      dtype = &d;
  if (!dtype) {
    if (!header->descr.empty() && header->descr[0] == '>')
      return absl::InvalidArgumentError(
          absl::StrCat("big-endian dtype '", header->descr,
                       "' is not supported: expected little-endian ('<",
                       header->descr.substr(1), "')"));
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported dtype '", header->descr,
                     "': expected one of ", supportedDescrs()));
  }
  if (header->fortranOrder)
    return absl::InvalidArgumentError(
        "fortran_order True is not supported: expected False (C order)");

  // The element count, guarded against overflow; no real file is this big.
  int64_t count = 1;
  for (int64_t d : header->shape) {
    if (d != 0 && count > (int64_t{1} << 50) / d)
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", shapeTuple(header->shape), " is too large"));
    count *= d;
  }
  absl::string_view data = bytes.substr(prefix + headerLength);
  uint64_t expectedBytes = static_cast<uint64_t>(count) * dtype->itemSize;
  if (data.size() != expectedBytes)
    return absl::InvalidArgumentError(absl::StrCat(
        data.size() < expectedBytes ? "truncated .npy data"
                                    : "trailing bytes after .npy data",
        ": expected ", expectedBytes, " bytes of '", dtype->descr,
        "' for shape ", shapeTuple(header->shape), ", found ", data.size()));

  HostTensor tensor(dtype->dtype, header->shape);
  auto in = absl::MakeConstSpan(reinterpret_cast<const uint8_t *>(data.data()),
                                data.size());
  if (tensor.isFloat())
    decodeFloats(dtype->dtype, in, tensor.floats());
  else if (absl::Status s = decodeInts(dtype->dtype, in, tensor.ints());
           !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("invalid .npy data: ", s.message()));
  return tensor;
}

std::string serializeNpy(const HostTensor &tensor) {
  absl::string_view descr;
  switch (tensor.dtype()) {
  case DType::F32:
  case DType::BF16:
    descr = "<f4";
    break;
  case DType::F64:
    descr = "<f8";
    break;
  case DType::F16:
    descr = "<f2";
    break;
  case DType::I1:
    descr = "|b1";
    break;
  case DType::I32:
    descr = "<i4";
    break;
  case DType::I64:
    descr = "<i8";
    break;
  }
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                   shapeTuple(tensor.shape()), ", }");
  // Pad so that the data starts at a multiple of 64 bytes (NumPy's
  // ARRAY_ALIGN); the header ends with a newline.
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  if ((total + 63) / 64 * 64 - prefix > 0xffff) {
    prefix = 12;
    total = prefix + dict.size() + 1;
  }
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';

  std::string out(kMagic);
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  size_t headerLength = dict.size();
  for (size_t i = 0; i < prefix - 8; ++i)
    out += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  out += dict;

  // bf16 has no NumPy dtype: it is written as float32, exactly.
  DType stored = tensor.dtype() == DType::BF16 ? DType::F32 : tensor.dtype();
  size_t begin = out.size();
  out.resize(begin +
             static_cast<size_t>(tensor.numElements() * dtypeSize(stored)));
  auto bytes = absl::MakeSpan(reinterpret_cast<uint8_t *>(&out[begin]),
                              out.size() - begin);
  if (tensor.isFloat())
    encodeFloats(stored, tensor.floats(), bytes);
  else
    encodeInts(stored, tensor.ints(), bytes);
  return out;
}

absl::StatusOr<HostTensor> readNpyFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open the .npy file for reading"));
  std::ostringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<HostTensor> tensor = parseNpy(contents.str());
  if (!tensor.ok())
    return absl::Status(tensor.status().code(),
                        absl::StrCat(path, ": ", tensor.status().message()));
  return tensor;
}

absl::Status writeNpyFile(const std::string &path, const HostTensor &tensor) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open the .npy file for writing"));
  std::string bytes = serializeNpy(tensor);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

} // namespace omni
