//===- Integrity.h - Checksums of step.bin ----------------------*- C++ -*-===//
//
// step.bin carries CRC-32C checksums (step.fbs `Integrity`): one of the whole
// file, computed with its own four bytes taken as zero, and one of every
// executable's code and every constant's data. omnic fills them in after
// building the FlatBuffer (sealStepBin); the loader recomputes them before it
// believes anything else in the file, so a corrupted byte is a one-line
// error naming the section instead of a crash or different numbers.
//
// The checksums catch accidents, not attackers: anyone who can write the
// file can recompute them (step.bin contains native code that omnirun
// executes; run only files you would run as programs).
//
// MLIR-free and dependency-free, shared by the compiler's writer, the
// loader and the tests.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_SCHEMA_INTEGRITY_H
#define OMNI_RUNTIME_SCHEMA_INTEGRITY_H

#include <cstddef>
#include <cstdint>
#include <optional>

namespace omni::step {

/// CRC-32C (Castagnoli) of `size` bytes, continuing from `crc` (0 starts a
/// new checksum): crc32c("123456789") = 0xe3069283. Uses the SSE4.2 crc32
/// instruction when the CPU has it.
uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc = 0);

/// The same, table-driven only (for tests of the hardware path).
uint32_t crc32cPortable(const uint8_t *data, size_t size, uint32_t crc = 0);

/// The byte offset of `integrity.file` in a FlatBuffers-verified step.bin,
/// or nullopt when the file has no integrity table or no file checksum.
std::optional<size_t> fileChecksumOffset(const uint8_t *data, size_t size);

/// CRC-32C of the `size` bytes at `data` with the four bytes at `offset`
/// taken as zero (offset + 4 <= size).
uint32_t fileChecksum(const uint8_t *data, size_t size, size_t offset);

/// Computes and stores every checksum of a FlatBuffers-verified step.bin in
/// place. Returns false (changing nothing) when the file has no integrity
/// table, no file checksum, or checksum vectors whose sizes differ from the
/// executables' and constants' counts.
bool sealStepBin(uint8_t *data, size_t size);

} // namespace omni::step

#endif // OMNI_RUNTIME_SCHEMA_INTEGRITY_H
