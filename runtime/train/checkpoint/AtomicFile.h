//===- AtomicFile.h - Replace a file atomically -----------------*- C++ -*-===//
//
// Writes that a crash cannot tear: the bytes go to `<path>.tmp.<pid>` in the
// same folder, are fsync'ed, and the temporary is renamed over `path` (rename
// is atomic within a file system), then the folder is fsync'ed so the rename
// itself survives a power loss. Readers see either the old file or the new
// one, never a prefix. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_CHECKPOINT_ATOMICFILE_H
#define OMNI_RUNTIME_TRAIN_CHECKPOINT_ATOMICFILE_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <string>

namespace omni::checkpoint {

/// Replaces (or creates) `path` with `bytes` atomically. On failure the
/// temporary is removed and `path` is untouched. The folder must exist.
absl::Status writeFileAtomically(const std::string &path,
                                 absl::string_view bytes);

/// The whole contents of `path`; NotFound when it cannot be opened.
/// `maxBytes` bounds the size read (InvalidArgument beyond it).
absl::StatusOr<std::string> readWholeFile(const std::string &path,
                                          uint64_t maxBytes = ~uint64_t{0});

} // namespace omni::checkpoint

#endif // OMNI_RUNTIME_TRAIN_CHECKPOINT_ATOMICFILE_H
