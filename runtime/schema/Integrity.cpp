//===- Integrity.cpp - Checksums of step.bin --------------------*- C++ -*-===//

#include "runtime/schema/Integrity.h"

#include "runtime/schema/step_generated.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace omni::step {
namespace {

/// Slicing-by-8 tables of the reflected Castagnoli polynomial.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s)
        t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const Tables &tables() {
  static const Tables tables;
  return tables;
}

/// The raw (not inverted) CRC register over `size` bytes.
uint32_t updatePortable(uint32_t c, const uint8_t *p, size_t size) {
  const auto &t = tables().t;
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8); // little-endian (x86-64)
    v ^= c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^
        t[4][(v >> 24) & 0xff] ^ t[3][(v >> 32) & 0xff] ^
        t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    size -= 8;
  }
  while (size--)
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
uint32_t updateHardware(uint32_t c, const uint8_t *p, size_t size) {
  uint64_t c64 = c;
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  while (size--)
    c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool haveHardware() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

uint32_t update(uint32_t c, const uint8_t *p, size_t size) {
#if defined(__x86_64__)
  if (haveHardware())
    return updateHardware(c, p, size);
#endif
  return updatePortable(c, p, size);
}

void storeU32(uint8_t *data, size_t offset, uint32_t value) {
  // FlatBuffers stores scalars little-endian, as x86-64 does.
  std::memcpy(data + offset, &value, 4);
}

} // namespace

uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc) {
  return ~update(~crc, data, size);
}

uint32_t crc32cPortable(const uint8_t *data, size_t size, uint32_t crc) {
  return ~updatePortable(~crc, data, size);
}

std::optional<size_t> fileChecksumOffset(const uint8_t *data, size_t size) {
  const Step *root = GetStep(data);
  const Integrity *integrity = root->integrity();
  if (!integrity || !integrity->file())
    return std::nullopt;
  const uint8_t *at = reinterpret_cast<const uint8_t *>(integrity->file());
  size_t offset = static_cast<size_t>(at - data);
  if (at < data || offset + 4 > size)
    return std::nullopt;
  return offset;
}

uint32_t fileChecksum(const uint8_t *data, size_t size, size_t offset) {
  static const uint8_t zero[4] = {};
  uint32_t c = ~0u;
  c = update(c, data, offset);
  c = update(c, zero, 4);
  c = update(c, data + offset + 4, size - offset - 4);
  return ~c;
}

bool sealStepBin(uint8_t *data, size_t size) {
  const Step *root = GetStep(data);
  const Integrity *integrity = root->integrity();
  std::optional<size_t> fileOffset = fileChecksumOffset(data, size);
  if (!integrity || !fileOffset)
    return false;
  auto count = [](const auto *v) -> uint32_t { return v ? v->size() : 0; };
  const auto *exeSums = integrity->executables();
  const auto *constSums = integrity->constants();
  if (count(exeSums) != count(root->executables()) ||
      count(constSums) != count(root->constants()))
    return false;
  auto blob = [](const flatbuffers::Vector<uint8_t> *v) {
    return v ? crc32c(v->data(), v->size()) : crc32c(nullptr, 0);
  };
  auto offsetOf = [&](const void *p) {
    return static_cast<size_t>(static_cast<const uint8_t *>(p) - data);
  };
  for (uint32_t e = 0; e < count(exeSums); ++e)
    storeU32(data, offsetOf(exeSums->Data() + 4 * e),
             blob(root->executables()->Get(e)->data()));
  for (uint32_t c = 0; c < count(constSums); ++c)
    storeU32(data, offsetOf(constSums->Data() + 4 * c),
             blob(root->constants()->Get(c)->data()));
  // Last: the file checksum covers the blobs' checksums.
  storeU32(data, *fileOffset, fileChecksum(data, size, *fileOffset));
  return true;
}

} // namespace omni::step
