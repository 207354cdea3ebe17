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

/// Removes the temporaries that writeFileAtomically leaves in `dir` when a
/// process dies mid-write (`<name>.tmp.<pid>` whose process no longer
/// exists; those of live processes, this one included, stay). Returns how
/// many were removed; a missing `dir` (or a file) removes none.
absl::StatusOr<int> removeStaleTemporaries(const std::string &dir);

/// A fingerprint of the bytes of `path` ("fnv1a64:" and 16 hex digits),
/// which tells two files apart (not a cryptographic hash).
absl::StatusOr<std::string> fingerprintFile(const std::string &path);

} // namespace omni::checkpoint

#endif // OMNI_RUNTIME_TRAIN_CHECKPOINT_ATOMICFILE_H
