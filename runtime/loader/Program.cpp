//===- Program.cpp - Map, verify and index a step.bin -----------*- C++ -*-===//
//
// Loading is three gates in order, each of which must pass before the next
// one may look at the bytes: (1) size and file identifier, read directly;
// (2) the FlatBuffers verifier, after which every table, vector and string
// accessor stays inside the buffer; (3) the semantic checks (Verify.cpp),
// after which the executor may index any vector with any index the file
// holds and compute any size without overflow.
//
//===----------------------------------------------------------------------===//

#include "runtime/loader/Program.h"

#include "runtime/base/Status.h"
#include "runtime/loader/Verify.h"
#include "runtime/schema/Integrity.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::loader {

/// The bytes of the file: a read-only mapping or an aligned heap copy.
struct Program::Storage {
  const uint8_t *data = nullptr;
  size_t size = 0;
  void *mapping = nullptr; // munmap on destruction when set
  size_t mappingSize = 0;
  void *heap = nullptr; // free on destruction when set

  ~Storage() {
    if (mapping)
      munmap(mapping, mappingSize);
    std::free(heap);
  }
};

DType toDType(step::DType dtype) {
  switch (dtype) {
  case step::DType::F32:
    return DType::F32;
  case step::DType::F64:
    return DType::F64;
  case step::DType::F16:
    return DType::F16;
  case step::DType::BF16:
    return DType::BF16;
  case step::DType::I1:
    return DType::I1;
  case step::DType::I32:
    return DType::I32;
  case step::DType::I64:
    return DType::I64;
  }
  return DType::F32;
}

std::string tensorTypeString(DType dtype, absl::Span<const int64_t> shape) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    absl::StrAppend(&s, d, "x");
  absl::StrAppend(&s, dtypeName(dtype), ">");
  return s;
}

std::string commandKindName(step::CommandKind kind) {
  if (kind >= step::CommandKind::MIN && kind <= step::CommandKind::MAX)
    return step::EnumNameCommandKind(kind);
  return absl::StrCat("kind ", static_cast<int>(kind));
}

std::string commandLabel(const step::Command &command) {
  std::string label = commandKindName(command.kind_type());
  if (const step::LibraryCall *c = command.kind_as_LibraryCall()) {
    if (c->library() >= step::Library::MIN &&
        c->library() <= step::Library::MAX)
      absl::StrAppend(&label, " ", step::EnumNameLibrary(c->library()));
  } else if (const step::Collective *c = command.kind_as_Collective()) {
    if (c->kind() >= step::CollectiveKind::MIN &&
        c->kind() <= step::CollectiveKind::MAX)
      absl::StrAppend(&label, " ", step::EnumNameCollectiveKind(c->kind()));
  } else if (const step::ScalarOp *op = command.kind_as_ScalarOp()) {
    if (op->kind() >= step::ScalarOpKind::MIN &&
        op->kind() <= step::ScalarOpKind::MAX)
      absl::StrAppend(&label, " ", step::EnumNameScalarOpKind(op->kind()));
  }
  return label;
}

MeshInfo::Group MeshInfo::groupOf(absl::Span<const uint32_t> groupAxes,
                                  int64_t rank) const {
  std::vector<int64_t> coords(shape.size());
  for (size_t a = shape.size(); a-- > 0;) {
    coords[a] = rank % shape[a];
    rank /= shape[a];
  }
  std::vector<bool> inGroup(shape.size());
  Group group;
  for (uint32_t a : groupAxes) {
    inGroup[a] = true;
    group.rank = group.rank * shape[a] + coords[a];
    group.size *= shape[a];
  }
  for (size_t a = 0; a < shape.size(); ++a)
    if (!inGroup[a])
      group.color = group.color * shape[a] + coords[a];
  return group;
}

std::string MeshInfo::describe() const {
  std::string s = absl::StrCat("'", name, "' (");
  for (size_t a = 0; a < axes.size(); ++a)
    absl::StrAppend(&s, a ? " x " : "", axes[a], "=", shape[a]);
  return s + ")";
}

std::string MeshInfo::axisNames(absl::Span<const uint32_t> list) const {
  std::string s;
  for (size_t i = 0; i < list.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", "'", axes[list[i]], "'");
  return s;
}

Program::Program(std::unique_ptr<Storage> storage, std::string name)
    : storage_(std::move(storage)), name_(std::move(name)) {}

Program::~Program() = default;

uint32_t Program::numScalars() const {
  return step_->scalars() ? step_->scalars()->size() : 0;
}

uint32_t Program::numFunctions() const {
  return step_->functions() ? step_->functions()->size() : 0;
}

std::optional<uint32_t> Program::findFunction(absl::string_view name) const {
  auto it = functionsByName_.find(name);
  if (it == functionsByName_.end())
    return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Program::findState(absl::string_view name) const {
  auto it = stateByName_.find(name);
  if (it == stateByName_.end())
    return std::nullopt;
  return it->second;
}

std::string Program::functionSignature(uint32_t function) const {
  const step::Function *fn = step_->functions()->Get(function);
  auto list = [&](const flatbuffers::Vector<uint32_t> *tensors) {
    std::string s = "(";
    if (tensors)
      for (uint32_t i = 0; i < tensors->size(); ++i)
        absl::StrAppend(&s, i ? ", " : "",
                        tensors_[tensors->Get(i)].typeString());
    return s + ")";
  };
  return absl::StrCat(list(fn->inputs()), " -> ", list(fn->outputs()));
}

namespace {

std::string printableIdentifier(const uint8_t *id) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (id[i] >= 0x20 && id[i] < 0x7f)
      s += static_cast<char>(id[i]);
    else
      absl::StrAppend(&s, "\\x", absl::Hex(id[i], absl::kZeroPad2));
  }
  return s;
}

std::string hex32(uint32_t v) {
  return absl::StrCat("0x", absl::Hex(v, absl::kZeroPad8));
}

/// The second gate's second half: the checksums of step.fbs `Integrity`
/// (Integrity.h). Each executable's code and each constant's data first, so
/// that a message can name the corrupt section; then the whole file, which
/// covers every other byte (the metadata and the checksums themselves).
/// `present` is false when the file has no checksums at all.
absl::Status checkIntegrity(const uint8_t *data, size_t size,
                            const step::Step &root, const std::string &name,
                            bool &present) {
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", message));
  };
  const char *corrupt = ": the file is corrupt (copy it again or recompile it)";
  const step::Integrity *integrity = root.integrity();
  std::optional<size_t> fileOffset = step::fileChecksumOffset(data, size);
  present = integrity != nullptr;
  if (!integrity || !fileOffset)
    return fail(absl::StrCat(
        integrity ? "integrity.file" : "integrity",
        " is missing but this omnirun needs the checksums omnic writes "
        "(written by an older omnic or another tool? recompile it)"));
  auto count = [](const auto *v) -> uint32_t { return v ? v->size() : 0; };
  struct Section {
    const char *table;
    uint32_t n;
    const flatbuffers::Vector<uint32_t> *sums;
    bool executables;
  };
  const Section sections[] = {
      {"executables", count(root.executables()), integrity->executables(),
       true},
      {"constants", count(root.constants()), integrity->constants(), false}};
  for (const Section &s : sections)
    if (count(s.sums) != s.n)
      return fail(absl::StrCat("integrity.", s.table, " has ", count(s.sums),
                               " checksums but there are ", s.n, " ", s.table,
                               corrupt));
  for (const Section &s : sections) {
    for (uint32_t i = 0; i < s.n; ++i) {
      const flatbuffers::Vector<uint8_t> *blob =
          s.executables ? root.executables()->Get(i)->data()
                        : root.constants()->Get(i)->data();
      uint32_t have = blob ? step::crc32c(blob->data(), blob->size()) : 0;
      if (have != s.sums->Get(i))
        return fail(absl::StrCat(s.table, "[", i, "].data (", count(blob),
                                 " bytes): CRC-32C is ", hex32(have),
                                 " but integrity.", s.table, "[", i,
                                 "] records ", hex32(s.sums->Get(i)), corrupt));
    }
  }
  uint32_t recorded = integrity->file()->value();
  uint32_t have = step::fileChecksum(data, size, *fileOffset);
  if (have != recorded)
    return fail(absl::StrCat("CRC-32C of the file's ", size, " bytes is ",
                             hex32(have), " but integrity.file records ",
                             hex32(recorded), corrupt));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::shared_ptr<const Program>>
Program::load(std::unique_ptr<Storage> storage, std::string name,
              const LoadOptions &options) {
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", message));
  };
  const size_t size = storage->size;
  // A root offset and the identifier.
  if (size < 8)
    return fail(absl::StrCat("file is ", size,
                             " bytes, too small for a step.bin (at least 8)"));
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return fail(absl::StrCat("file is ", size,
                             " bytes but a FlatBuffer holds at most ",
                             FLATBUFFERS_MAX_BUFFER_SIZE - 1));
  if (!step::StepBufferHasIdentifier(storage->data))
    return fail(absl::StrCat(
        "file identifier is '", printableIdentifier(storage->data + 4),
        "' but a step.bin has '", step::StepIdentifier(), "'"));
  flatbuffers::Verifier verifier(storage->data, size);
  if (!step::VerifyStepBuffer(verifier))
    return fail("the FlatBuffers verifier rejected the file (an offset, "
                "length or nesting depth is out of range): the file is "
                "corrupt (copy it again or recompile it)");
  const step::Step *root = step::GetStep(storage->data);
  // Checksums before anything the file says is believed; but a file from
  // another version, which may keep them elsewhere, is named as such.
  bool checksummed = false;
  absl::Status integrity =
      checkIntegrity(storage->data, size, *root, name, checksummed);
  if ((integrity.ok() || !checksummed) && root->version() != kSupportedVersion)
    return fail(absl::StrCat("version = ", root->version(),
                             " but this omnirun reads version ",
                             kSupportedVersion));
  OMNI_RETURN_IF_ERROR(integrity);

  std::shared_ptr<Program> program(
      new Program(std::move(storage), std::move(name)));
  program->step_ = root;
  OMNI_RETURN_IF_ERROR(verifyProgram(*program, options));
  return std::shared_ptr<const Program>(std::move(program));
}

absl::StatusOr<std::shared_ptr<const Program>>
Program::loadFile(const std::string &path, const LoadOptions &options) {
  std::string name = options.name.empty() ? path : options.name;
  auto osError = [&](absl::string_view what) {
    int err = errno;
    std::string message =
        absl::StrCat(name, ": cannot ", what, ": ", std::strerror(err));
    if (err == ENOENT)
      return absl::NotFoundError(message);
    if (err == EACCES)
      return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer forever; the type is checked on the open descriptor (no race
  // between a stat and the open), and mmap of a regular file ignores the
  // flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return osError("open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = osError("stat");
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char *type = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "of another type";
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": is ", type, " but a step.bin must be a regular file"));
  }
  auto storage = std::make_unique<Storage>();
  storage->size = static_cast<size_t>(st.st_size);
  if (storage->size > 0) {
    void *m = ::mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      absl::Status s = osError("map");
      ::close(fd);
      return s;
    }
    storage->mapping = m;
    storage->mappingSize = storage->size;
    storage->data = static_cast<const uint8_t *>(m);
  } else {
    static const uint8_t empty[8] = {};
    storage->data = empty;
  }
  ::close(fd);
  return load(std::move(storage), std::move(name), options);
}

absl::StatusOr<std::shared_ptr<const Program>>
Program::loadBytes(absl::string_view bytes, const LoadOptions &options) {
  std::string name = options.name.empty() ? "step.bin" : options.name;
  auto storage = std::make_unique<Storage>();
  // 64-byte aligned: more than the 32 bytes step.fbs's force_align and the
  // verifier's scalar alignment need.
  size_t alloc = (bytes.size() + 63) / 64 * 64;
  storage->heap = std::aligned_alloc(64, alloc ? alloc : 64);
  if (!storage->heap)
    return absl::ResourceExhaustedError(absl::StrCat(
        name, ": cannot allocate ", bytes.size(), " bytes for the file"));
  if (!bytes.empty())
    std::memcpy(storage->heap, bytes.data(), bytes.size());
  storage->data = static_cast<const uint8_t *>(storage->heap);
  storage->size = bytes.size();
  return load(std::move(storage), std::move(name), options);
}

bool HyperParamInfo::contains(double v) const {
  if (v != v)
    return false;
  bool aboveLo = loOpen ? v > lo : v >= lo;
  bool belowHi = hiOpen ? v < hi : v <= hi;
  return aboveLo && belowHi;
}

bool parseRange(absl::string_view text, HyperParamInfo &info) {
  if (text.size() < 5)
    return false;
  char open = text.front(), close = text.back();
  if ((open != '[' && open != '(') || (close != ']' && close != ')'))
    return false;
  std::vector<absl::string_view> bounds =
      absl::StrSplit(text.substr(1, text.size() - 2), ',');
  if (bounds.size() != 2)
    return false;
  double values[2];
  for (int k = 0; k < 2; ++k) {
    absl::string_view b = absl::StripAsciiWhitespace(bounds[k]);
    if (b == "inf" || b == "+inf")
      values[k] = HUGE_VAL;
    else if (b == "-inf")
      values[k] = -HUGE_VAL;
    else if (!absl::SimpleAtod(b, &values[k]) || values[k] != values[k] ||
             b.find_first_of("iInN") != absl::string_view::npos)
      return false;
  }
  if (values[0] > values[1])
    return false;
  info.lo = values[0];
  info.hi = values[1];
  info.loOpen = open == '(';
  info.hiOpen = close == ')';
  return true;
}

const std::string *Program::findMetadata(absl::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const HyperParamInfo *Program::findHyperParam(absl::string_view name) const {
  for (const HyperParamInfo &h : hparams_)
    if (h.name == name)
      return &h;
  return nullptr;
}

} // namespace omni::loader
