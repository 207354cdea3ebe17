//===- Safetensors.h - diffusers-compatible .safetensors files --*- C++ -*-===//
//
// Reads and writes the safetensors format (huggingface/safetensors), the
// checkpoint format of the training driver, so that checkpoints load in
// diffusers/PyTorch and Python-written weights load here. Layout: an 8-byte
// little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "w": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [0, 24]}, ...}
// then the byte buffer; offsets are relative to the buffer, tensors are
// contiguous, row-major and little-endian. dtypes map F32/F64/F16/BF16/BOOL/
// I32/I64 to omni's F32/F64/F16/BF16/I1/I32/I64.
//
// Files are never trusted: the header is parsed by a strict JSON reader for
// the subset the format uses, and every field, size and offset is checked
// before any element is read; each rejection is one lowercase line naming
// the file, the tensor, the field, what was expected and what was found.
// MLIR-free. All functions are thread-compatible (no shared state).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_CHECKPOINT_SAFETENSORS_H
#define OMNI_RUNTIME_TRAIN_CHECKPOINT_SAFETENSORS_H

#include "runtime/io/HostTensor.h"
#include "runtime/io/TypedTensor.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace omni::checkpoint {

/// One tensor of a safetensors file. Owns its elements.
struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

/// Everything a safetensors file holds.
struct SafetensorsContents {
  /// Sorted by name.
  std::vector<NamedTensor> tensors;
  /// The "__metadata__" string map (empty when the file has none).
  std::map<std::string, std::string> metadata;
};

/// The largest header accepted (the limit of the reference implementation).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// Decodes the bytes of a safetensors file; `fileName` prefixes every error
/// message. Fails with InvalidArgument on any violation of the format.
absl::StatusOr<SafetensorsContents>
parseSafetensors(absl::string_view bytes, absl::string_view fileName);

/// Encodes tensors (written in name order, offsets increasing) and
/// metadata (omitted when empty) as a safetensors file. The compact JSON
/// header is padded with spaces to a multiple of 8 bytes. Fails with
/// InvalidArgument on duplicate tensor names or the reserved name
/// "__metadata__".
absl::StatusOr<std::string>
serializeSafetensors(const std::vector<NamedTensor> &tensors,
                     const std::map<std::string, std::string> &metadata = {});

/// parseSafetensors on the contents of `path` (NotFound when it cannot be
/// opened).
absl::StatusOr<SafetensorsContents>
readSafetensorsWithMetadata(const std::string &path);

/// The tensors of `path`, sorted by name.
absl::StatusOr<std::vector<NamedTensor>>
readSafetensors(const std::string &path);

/// Writes serializeSafetensors(tensors, metadata) to `path` atomically
/// (temporary + fsync + rename, see AtomicFile.h).
absl::Status
writeSafetensors(const std::string &path,
                 const std::vector<NamedTensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

//===--- Typed tensors: the file's bytes, no widening ---------------------===//
//
// The same format and checks, with each tensor kept as its dtype's bytes
// (TypedTensor): reading copies each tensor's bytes out of the file once,
// writing copies each tensor's bytes into the file image once. The training
// driver's checkpoints use these.

/// One tensor of a safetensors file, as bytes. Owns its elements.
struct NamedTypedTensor {
  std::string name;
  TypedTensor tensor;
};

struct TypedSafetensorsContents {
  /// Sorted by name.
  std::vector<NamedTypedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// parseSafetensors, keeping the elements' bytes (BOOL bytes are checked to
/// be 0 or 1 as there).
absl::StatusOr<TypedSafetensorsContents>
parseSafetensorsTyped(absl::string_view bytes, absl::string_view fileName);

/// serializeSafetensors of typed tensors: the same bytes for the same
/// tensors.
absl::StatusOr<std::string> serializeSafetensorsTyped(
    const std::vector<NamedTypedTensor> &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// parseSafetensorsTyped on the contents of `path` (NotFound when it cannot
/// be opened).
absl::StatusOr<TypedSafetensorsContents>
readSafetensorsTyped(const std::string &path);

/// Writes serializeSafetensorsTyped(tensors, metadata) to `path`
/// atomically.
absl::Status
writeSafetensorsTyped(const std::string &path,
                      const std::vector<NamedTypedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

//===--- Reading one tensor at a time -------------------------------------===//
//
// For files too large to hold twice (a diffusers model's weights):
// open() reads and checks only the header (the same checks as
// parseSafetensors, against the file's size), and read() copies one
// tensor's bytes out of the file with pread, so the memory a caller holds
// is the tensors it keeps. Thread-compatible; read() may be called from
// several threads at once (pread has no shared file position).

class SafetensorsReader {
public:
  struct TensorInfo {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    /// Its bytes' offset in the data buffer, and their count.
    uint64_t offset = 0, byteSize = 0;
  };

  /// Opens `path` and validates its header; NotFound when it cannot be
  /// opened, InvalidArgument (naming the file) when the header is not a
  /// valid safetensors header for a file of its size.
  static absl::StatusOr<SafetensorsReader> open(const std::string &path);

  SafetensorsReader(SafetensorsReader &&other) noexcept;
  SafetensorsReader &operator=(SafetensorsReader &&) = delete;
  ~SafetensorsReader();

  const std::string &path() const { return path_; }
  /// Sorted by name.
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The tensor `name`, or null.
  const TensorInfo *find(absl::string_view name) const;
  /// The bytes of one of tensors() (BOOL bytes checked to be 0 or 1);
  /// DataLoss when the file has become shorter since open().
  absl::StatusOr<TypedTensor> read(const TensorInfo &info) const;

private:
  SafetensorsReader() = default;
  std::string path_;
  int fd_ = -1;
  uint64_t dataOffset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

} // namespace omni::checkpoint

#endif // OMNI_RUNTIME_TRAIN_CHECKPOINT_SAFETENSORS_H
