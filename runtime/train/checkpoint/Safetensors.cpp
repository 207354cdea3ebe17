//===- Safetensors.cpp - .safetensors files -------------------*- C++ -*-===//
//
// The header is read by the strict JSON reader of Json.h, which keeps
// duplicate keys and negative numbers so the checks here can name them
// rather than report a generic syntax error. The semantic pass then validates
// each tensor entry and the layout of the buffer (contiguous, non-overlapping,
// exactly covered) before decoding anything, so a hostile file can neither read
// out of bounds nor make us allocate more than its own size. The writer emits
// the compact header the reference implementation (serde_json) produces, so
// Python reads our files unchanged.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/Safetensors.h"

#include "runtime/base/Status.h"
#include "runtime/io/ElementCodec.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "runtime/train/checkpoint/Safetensors.cpp assumes a little-endian host"
#endif

namespace omni::checkpoint {
namespace {

using json::appendJsonString;
using json::isValidUtf8;
using json::JsonMember;
using json::JsonValue;
using json::kindName;
using json::quoted;

//===----------------------------------------------------------------------===//
// dtypes
//===----------------------------------------------------------------------===//

struct StDType {
  absl::string_view name;
  DType dtype;
  uint64_t itemSize;
};

constexpr StDType kDTypes[] = {
    {"F32", DType::F32, 4},   {"F64", DType::F64, 8}, {"F16", DType::F16, 2},
    {"BF16", DType::BF16, 2}, {"BOOL", DType::I1, 1}, {"I32", DType::I32, 4},
    {"I64", DType::I64, 8},
};

const StDType &stDTypeOf(DType dtype) {
  for (const StDType &d : kDTypes)
    if (d.dtype == dtype)
      return d;
  return kDTypes[0]; // unreachable: every DType is listed
}

const StDType *findStDType(absl::string_view name) {
  for (const StDType &d : kDTypes)
    if (d.name == name)
      return &d;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Header validation
//===----------------------------------------------------------------------===//

/// One validated tensor entry of the header.
struct Entry {
  std::string name;
  const StDType *dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

std::string shapeList(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string integerText(const JsonValue &v) {
  return absl::StrCat(v.negative ? "-" : "", v.magnitude);
}

/// Validates and collects the tensor entries and metadata of the header.
class HeaderChecker {
public:
  HeaderChecker(absl::string_view fileName, uint64_t bufferSize)
      : fileName(fileName), bufferSize(bufferSize) {}

  absl::Status check(const JsonValue &root, std::vector<Entry> &entries,
                     std::map<std::string, std::string> &metadata) {
    if (root.kind != JsonValue::Kind::Object)
      return error(absl::StrCat("header is ", kindName(root.kind),
                                ", expected an object"));
    std::set<std::string> seen;
    for (const JsonMember &member : root.members) {
      if (!seen.insert(member.key).second)
        return error(member.key == "__metadata__"
                         ? std::string("'__metadata__' appears twice in the "
                                       "header, expected at most once")
                         : absl::StrCat("tensor ", quoted(member.key),
                                        " appears twice in the header, "
                                        "expected unique names"));
      if (member.key == "__metadata__") {
        if (absl::Status s = checkMetadata(member.value, metadata); !s.ok())
          return s;
        continue;
      }
      Entry entry;
      if (absl::Status s = checkEntry(member.key, member.value, entry); !s.ok())
        return s;
      entries.push_back(std::move(entry));
    }
    return checkLayout(entries);
  }

private:
  absl::string_view fileName;
  uint64_t bufferSize;

  absl::Status error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(fileName, ": ", message));
  }
  absl::Status tensorError(absl::string_view name,
                           absl::string_view message) const {
    return error(absl::StrCat("tensor ", quoted(name), ": ", message));
  }

  absl::Status checkMetadata(const JsonValue &value,
                             std::map<std::string, std::string> &metadata) {
    if (value.kind != JsonValue::Kind::Object)
      return error(absl::StrCat("'__metadata__' is ", kindName(value.kind),
                                ", expected an object of strings"));
    for (const JsonMember &m : value.members) {
      if (m.value.kind != JsonValue::Kind::String)
        return error(absl::StrCat("'__metadata__' key ", quoted(m.key), " is ",
                                  kindName(m.value.kind),
                                  ", expected a string"));
      if (!metadata.emplace(m.key, m.value.text).second)
        return error(absl::StrCat("'__metadata__' key ", quoted(m.key),
                                  " appears twice, expected unique keys"));
    }
    return absl::OkStatus();
  }

  /// Reads a non-negative integer field element into `out`.
  absl::Status nonNegative(absl::string_view name, absl::string_view field,
                           const JsonValue &v, uint64_t limit,
                           uint64_t &out) const {
    if (v.kind != JsonValue::Kind::Integer)
      return tensorError(name, absl::StrCat(field, " is ", kindName(v.kind),
                                            ", expected a non-negative "
                                            "integer"));
    if (v.negative)
      return tensorError(name, absl::StrCat(field, " is ", integerText(v),
                                            ", expected a non-negative "
                                            "integer"));
    if (v.magnitude > limit)
      return tensorError(name, absl::StrCat(field, " is ", v.magnitude,
                                            ", expected at most ", limit));
    out = v.magnitude;
    return absl::OkStatus();
  }

  absl::Status checkEntry(const std::string &name, const JsonValue &value,
                          Entry &entry) {
    entry.name = name;
    if (value.kind != JsonValue::Kind::Object)
      return tensorError(name, absl::StrCat("entry is ", kindName(value.kind),
                                            ", expected an object"));
    const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const JsonMember &m : value.members) {
      const JsonValue **slot = m.key == "dtype"          ? &dtype
                               : m.key == "shape"        ? &shape
                               : m.key == "data_offsets" ? &offsets
                                                         : nullptr;
      if (!slot)
        return tensorError(name, absl::StrCat("unknown field ", quoted(m.key),
                                              ", expected 'dtype', 'shape' "
                                              "or 'data_offsets'"));
      if (*slot)
        return tensorError(name, absl::StrCat("field ", quoted(m.key),
                                              " appears twice, expected "
                                              "once"));
      *slot = &m.value;
    }
    for (auto [field, v] :
         {std::pair<absl::string_view, const JsonValue *>{"dtype", dtype},
          {"shape", shape},
          {"data_offsets", offsets}})
      if (!v)
        return tensorError(name, absl::StrCat("missing field '", field, "'"));

    // dtype
    if (dtype->kind != JsonValue::Kind::String)
      return tensorError(name, absl::StrCat("dtype is ", kindName(dtype->kind),
                                            ", expected a string"));
    entry.dtype = findStDType(dtype->text);
    if (!entry.dtype) {
      std::vector<absl::string_view> names;
      for (const StDType &d : kDTypes)
        names.push_back(d.name);
      return tensorError(name, absl::StrCat("dtype ", quoted(dtype->text),
                                            " is not supported, expected one "
                                            "of ",
                                            absl::StrJoin(names, ", ")));
    }

    // shape
    if (shape->kind != JsonValue::Kind::Array)
      return tensorError(name, absl::StrCat("shape is ", kindName(shape->kind),
                                            ", expected an array"));
    for (size_t i = 0; i < shape->elements.size(); ++i) {
      uint64_t dim;
      if (absl::Status s = nonNegative(
              name, absl::StrCat("shape[", i, "]"), shape->elements[i],
              std::numeric_limits<int64_t>::max(), dim);
          !s.ok())
        return s;
      entry.shape.push_back(static_cast<int64_t>(dim));
    }

    // data_offsets
    if (offsets->kind != JsonValue::Kind::Array)
      return tensorError(name, absl::StrCat("data_offsets is ",
                                            kindName(offsets->kind),
                                            ", expected an array"));
    if (offsets->elements.size() != 2)
      return tensorError(name, absl::StrCat("data_offsets has ",
                                            offsets->elements.size(),
                                            " entries, expected 2"));
    uint64_t limit = std::numeric_limits<uint64_t>::max();
    if (absl::Status s = nonNegative(name, "data_offsets[0]",
                                     offsets->elements[0], limit, entry.begin);
        !s.ok())
      return s;
    if (absl::Status s = nonNegative(name, "data_offsets[1]",
                                     offsets->elements[1], limit, entry.end);
        !s.ok())
      return s;
    std::string offsetText =
        absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "]");
    if (entry.end < entry.begin)
      return tensorError(name,
                         absl::StrCat(offsetText, " end before they begin, "
                                                  "expected begin <= end"));
    if (entry.end > bufferSize)
      return tensorError(name,
                         absl::StrCat(offsetText, " run past the end of the ",
                                      bufferSize, "-byte data buffer"));

    // Size: the element count must fit int64 (HostTensor) even when a zero
    // dimension makes the product zero, and count * itemSize must not wrap.
    uint64_t nonZeroProduct = 1;
    bool hasZero = false;
    for (int64_t d : entry.shape) {
      if (d == 0) {
        hasZero = true;
        continue;
      }
      if (__builtin_mul_overflow(nonZeroProduct, static_cast<uint64_t>(d),
                                 &nonZeroProduct) ||
          nonZeroProduct >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return tensorError(name, absl::StrCat("shape ", shapeList(entry.shape),
                                              " has more than 2^63-1 "
                                              "elements"));
    }
    uint64_t count = hasZero ? 0 : nonZeroProduct;
    uint64_t needed;
    if (__builtin_mul_overflow(count, entry.dtype->itemSize, &needed))
      return tensorError(name, absl::StrCat("shape ", shapeList(entry.shape),
                                            " of ", entry.dtype->name,
                                            " needs more than 2^64 bytes"));
    if (entry.end - entry.begin != needed)
      return tensorError(
          name, absl::StrCat(offsetText, " span ", entry.end - entry.begin,
                             " bytes but shape ", shapeList(entry.shape),
                             " of ", entry.dtype->name, " needs ", needed));
    return absl::OkStatus();
  }

  /// The tensors, in offset order, must tile the buffer exactly.
  absl::Status checkLayout(const std::vector<Entry> &entries) const {
    std::vector<size_t> order(entries.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::make_pair(entries[a].begin, entries[a].end) <
             std::make_pair(entries[b].begin, entries[b].end);
    });
    uint64_t cursor = 0;
    const Entry *previous = nullptr;
    for (size_t i : order) {
      const Entry &e = entries[i];
      std::string offsetText =
          absl::StrCat("data_offsets [", e.begin, ", ", e.end, "]");
      if (e.begin < cursor)
        return tensorError(e.name,
                           absl::StrCat(offsetText, " overlap tensor ",
                                        quoted(previous->name), " at [",
                                        previous->begin, ", ", previous->end,
                                        "], expected disjoint ranges"));
      if (e.begin > cursor)
        return tensorError(
            e.name,
            previous ? absl::StrCat(offsetText, " leave a gap after tensor ",
                                    quoted(previous->name),
                                    ", expected it to begin at ", cursor)
                     : absl::StrCat(offsetText, " leave a gap at the start "
                                                "of the buffer, expected the "
                                                "first tensor to begin at 0"));
      cursor = e.end;
      previous = &e;
    }
    if (cursor != bufferSize)
      return error(absl::StrCat("data buffer is ", bufferSize,
                                " bytes but the tensors cover ", cursor,
                                ", expected no trailing bytes"));
    return absl::OkStatus();
  }
};

//===----------------------------------------------------------------------===//
// Element coding
//===----------------------------------------------------------------------===//

// The element codec (runtime/io/ElementCodec.h) owns every rule: rounding,
// NaN bits, i1 bytes.

/// Decodes one validated entry. Only BOOL bytes can still be invalid.
absl::Status decodeElements(absl::string_view fileName, const Entry &e,
                            absl::string_view bytes, HostTensor &t) {
  auto in = absl::MakeConstSpan(reinterpret_cast<const uint8_t *>(bytes.data()),
                                bytes.size());
  if (t.isFloat()) {
    decodeFloats(t.dtype(), in, t.floats());
    return absl::OkStatus();
  }
  if (absl::Status s = decodeInts(t.dtype(), in, t.ints()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(fileName, ": tensor ", quoted(e.name), ": ", s.message()));
  return absl::OkStatus();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

namespace {

/// The validated header of a safetensors file: its entries sorted by name,
/// its metadata, and the data buffer the entries' offsets index.
struct Layout {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  absl::string_view buffer;
};

/// Parses and validates the JSON header of a file whose data buffer is
/// `bufferSize` bytes: the entries sorted by name and the metadata.
absl::Status parseHeader(absl::string_view header, absl::string_view fileName,
                         uint64_t bufferSize, std::vector<Entry> &entries,
                         std::map<std::string, std::string> &metadata) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(fileName, ": ", message));
  };
  if (header.empty() || header[0] != '{')
    return error(absl::StrCat("header starts with ",
                              header.empty() ? std::string("nothing")
                                             : quoted(header.substr(0, 1)),
                              ", expected '{'"));
  JsonValue root;
  std::string jsonError;
  if (!json::parseJson(header, root, jsonError))
    return error(jsonError);
  HeaderChecker checker(fileName, bufferSize);
  OMNI_RETURN_IF_ERROR(checker.check(root, entries, metadata));
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.name < b.name; });
  return absl::OkStatus();
}

/// The checks of the 8-byte header length against a file of `fileSize`
/// bytes.
absl::Status checkHeaderLength(uint64_t headerLength, uint64_t fileSize,
                               absl::string_view fileName) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(fileName, ": ", message));
  };
  if (fileSize < 8)
    return error(absl::StrCat("file is ", fileSize,
                              " bytes, expected at least 8 for the header "
                              "length"));
  uint64_t afterLength = fileSize - 8;
  if (headerLength > kMaxSafetensorsHeaderBytes)
    return error(absl::StrCat("header length ", headerLength,
                              " exceeds the limit of ",
                              kMaxSafetensorsHeaderBytes, " bytes"));
  if (headerLength > afterLength)
    return error(absl::StrCat("header length ", headerLength,
                              " runs past the end of the file, expected at "
                              "most ",
                              afterLength));
  return absl::OkStatus();
}

absl::StatusOr<Layout> parseLayout(absl::string_view bytes,
                                   absl::string_view fileName) {
  uint64_t headerLength = 0;
  if (bytes.size() >= 8)
    std::memcpy(&headerLength, bytes.data(), 8);
  OMNI_RETURN_IF_ERROR(checkHeaderLength(headerLength, bytes.size(), fileName));
  Layout layout;
  layout.buffer = bytes.substr(8 + headerLength);
  OMNI_RETURN_IF_ERROR(parseHeader(bytes.substr(8, headerLength), fileName,
                                   layout.buffer.size(), layout.entries,
                                   layout.metadata));
  return layout;
}

/// The name checks of serializeSafetensors on names sorted ascending.
absl::Status checkNames(const std::vector<const std::string *> &sorted,
                        const std::map<std::string, std::string> &metadata) {
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string &name = *sorted[i];
    if (name == "__metadata__")
      return absl::InvalidArgumentError(
          "tensor name '__metadata__' is reserved for the metadata map");
    if (i > 0 && *sorted[i - 1] == name)
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", quoted(name), " appears twice, expected unique names"));
    if (!isValidUtf8(name))
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name ", quoted(name), " is not valid UTF-8"));
  }
  for (const auto &[key, value] : metadata)
    if (!isValidUtf8(key) || !isValidUtf8(value))
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key ", quoted(key), " or its value is not valid UTF-8"));
  return absl::OkStatus();
}

/// The header: metadata, then each tensor's entry at consecutive offsets.
std::string headerOf(const std::vector<const NamedTypedTensor *> &sorted,
                     const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      if (!first)
        header += ',';
      first = false;
      appendJsonString(header, key);
      header += ':';
      appendJsonString(header, value);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const NamedTypedTensor *t : sorted) {
    uint64_t begin = offset;
    offset += static_cast<uint64_t>(t->tensor.byteSize());
    if (header.size() > 1)
      header += ',';
    appendJsonString(header, t->name);
    absl::StrAppend(&header, ":{\"dtype\":\"",
                    stDTypeOf(t->tensor.dtype()).name, "\",\"shape\":[",
                    absl::StrJoin(t->tensor.shape(), ","),
                    "],\"data_offsets\":[", begin, ",", offset, "]}");
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

} // namespace

absl::StatusOr<SafetensorsContents>
parseSafetensors(absl::string_view bytes, absl::string_view fileName) {
  OMNI_ASSIGN_OR_RETURN(Layout layout, parseLayout(bytes, fileName));
  SafetensorsContents contents;
  contents.metadata = std::move(layout.metadata);
  contents.tensors.reserve(layout.entries.size());
  for (const Entry &e : layout.entries) {
    HostTensor t(e.dtype->dtype, e.shape);
    if (absl::Status s = decodeElements(
            fileName, e, layout.buffer.substr(e.begin, e.end - e.begin), t);
        !s.ok())
      return s;
    contents.tensors.push_back({e.name, std::move(t)});
  }
  return contents;
}

absl::StatusOr<TypedSafetensorsContents>
parseSafetensorsTyped(absl::string_view bytes, absl::string_view fileName) {
  OMNI_ASSIGN_OR_RETURN(Layout layout, parseLayout(bytes, fileName));
  TypedSafetensorsContents contents;
  contents.metadata = std::move(layout.metadata);
  contents.tensors.reserve(layout.entries.size());
  for (const Entry &e : layout.entries) {
    absl::string_view data = layout.buffer.substr(e.begin, e.end - e.begin);
    auto in = absl::MakeConstSpan(
        reinterpret_cast<const uint8_t *>(data.data()), data.size());
    if (e.dtype->dtype == DType::I1)
      if (absl::Status s = checkI1Bytes(in); !s.ok())
        return absl::InvalidArgumentError(absl::StrCat(
            fileName, ": tensor ", quoted(e.name), ": ", s.message()));
    contents.tensors.push_back(
        {e.name, TypedTensor::fromBytes(e.dtype->dtype, e.shape, in)});
  }
  return contents;
}

absl::StatusOr<std::string>
serializeSafetensorsTyped(const std::vector<NamedTypedTensor> &tensors,
                          const std::map<std::string, std::string> &metadata) {
  std::vector<const NamedTypedTensor *> sorted;
  for (const NamedTypedTensor &t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const NamedTypedTensor *a, const NamedTypedTensor *b) {
              return a->name < b->name;
            });
  std::vector<const std::string *> names;
  for (const NamedTypedTensor *t : sorted)
    names.push_back(&t->name);
  OMNI_RETURN_IF_ERROR(checkNames(names, metadata));
  std::string header = headerOf(sorted, metadata);
  size_t dataBytes = 0;
  for (const NamedTypedTensor *t : sorted)
    dataBytes += static_cast<size_t>(t->tensor.byteSize());
  std::string out;
  out.reserve(8 + header.size() + dataBytes);
  uint64_t length = header.size();
  char lengthBytes[8];
  std::memcpy(lengthBytes, &length, 8);
  out.append(lengthBytes, 8);
  out += header;
  for (const NamedTypedTensor *t : sorted)
    out.append(reinterpret_cast<const char *>(t->tensor.bytes().data()),
               t->tensor.bytes().size());
  return out;
}

absl::StatusOr<TypedSafetensorsContents>
readSafetensorsTyped(const std::string &path) {
  OMNI_ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
  return parseSafetensorsTyped(bytes, path);
}

absl::Status
writeSafetensorsTyped(const std::string &path,
                      const std::vector<NamedTypedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  absl::StatusOr<std::string> bytes =
      serializeSafetensorsTyped(tensors, metadata);
  if (!bytes.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.status().message()));
  return writeFileAtomically(path, *bytes);
}

absl::StatusOr<std::string>
serializeSafetensors(const std::vector<NamedTensor> &tensors,
                     const std::map<std::string, std::string> &metadata) {
  // One writer: the elements go through the element codec into their
  // dtype's bytes (TypedTensor::fromHost), so both entry points write the
  // same file for the same values.
  std::vector<NamedTypedTensor> typed;
  typed.reserve(tensors.size());
  for (const NamedTensor &t : tensors)
    typed.push_back({t.name, TypedTensor::fromHost(t.tensor)});
  return serializeSafetensorsTyped(typed, metadata);
}

absl::StatusOr<SafetensorsContents>
readSafetensorsWithMetadata(const std::string &path) {
  absl::StatusOr<std::string> bytes = readWholeFile(path);
  if (!bytes.ok())
    return bytes.status();
  return parseSafetensors(*bytes, path);
}

absl::StatusOr<std::vector<NamedTensor>>
readSafetensors(const std::string &path) {
  absl::StatusOr<SafetensorsContents> contents =
      readSafetensorsWithMetadata(path);
  if (!contents.ok())
    return contents.status();
  return std::move(contents->tensors);
}

absl::Status
writeSafetensors(const std::string &path,
                 const std::vector<NamedTensor> &tensors,
                 const std::map<std::string, std::string> &metadata) {
  absl::StatusOr<std::string> bytes = serializeSafetensors(tensors, metadata);
  if (!bytes.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.status().message()));
  return writeFileAtomically(path, *bytes);
}

//===----------------------------------------------------------------------===//
// SafetensorsReader
//===----------------------------------------------------------------------===//

namespace {

/// pread until `size` bytes are in `out` (false on an error or end of file).
bool readFully(int fd, uint64_t offset, uint8_t *out, uint64_t size) {
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return true;
}

} // namespace

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0)
    ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader &&other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_),
      dataOffset_(other.dataOffset_), tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {
  other.fd_ = -1;
}

absl::StatusOr<SafetensorsReader>
SafetensorsReader::open(const std::string &path) {
  SafetensorsReader reader;
  reader.path_ = path;
  reader.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader.fd_ < 0)
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(reader.fd_, &st) != 0 || !S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file, expected a safetensors "
                           "file"));
  uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  uint64_t headerLength = 0;
  if (fileSize >= 8 &&
      !readFully(reader.fd_, 0, reinterpret_cast<uint8_t *>(&headerLength), 8))
    return absl::DataLossError(
        absl::StrCat(path, ": cannot read the header length"));
  OMNI_RETURN_IF_ERROR(checkHeaderLength(headerLength, fileSize, path));
  std::string header(headerLength, '\0');
  if (!readFully(reader.fd_, 8, reinterpret_cast<uint8_t *>(header.data()),
                 headerLength))
    return absl::DataLossError(
        absl::StrCat(path, ": cannot read the ", headerLength, "-byte header"));
  std::vector<Entry> entries;
  OMNI_RETURN_IF_ERROR(parseHeader(header, path, fileSize - 8 - headerLength,
                                   entries, reader.metadata_));
  reader.dataOffset_ = 8 + headerLength;
  reader.tensors_.reserve(entries.size());
  for (Entry &e : entries)
    reader.tensors_.push_back({std::move(e.name), e.dtype->dtype,
                               std::move(e.shape), e.begin, e.end - e.begin});
  return reader;
}

const SafetensorsReader::TensorInfo *
SafetensorsReader::find(absl::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo &t, absl::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

absl::StatusOr<TypedTensor>
SafetensorsReader::read(const TensorInfo &info) const {
  TypedTensor t(info.dtype, info.shape);
  if (!readFully(fd_, dataOffset_ + info.offset, t.bytes().data(),
                 info.byteSize))
    return absl::DataLossError(
        absl::StrCat(path_, ": tensor ", quoted(info.name), ": cannot read ",
                     info.byteSize, " bytes at offset ",
                     dataOffset_ + info.offset, " (was the file truncated?)"));
  if (info.dtype == DType::I1)
    if (absl::Status s = checkI1Bytes(t.bytes()); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": tensor ", quoted(info.name), ": ", s.message()));
  return t;
}

} // namespace omni::checkpoint
