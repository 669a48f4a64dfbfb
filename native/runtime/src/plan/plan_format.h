// The .mlplan file layout (docs/plan-format.md), defined once on the C++ side.
// src/compiler/plan-format.ts is the TypeScript twin; both test against the doc.
//
// | offset | size | field                                                  |
// |      0 |    8 | magic, ASCII "MLRTPLAN"                                |
// |      8 |    4 | u32 format version = 4 (2 and 3 still read)            |
// |     12 |    4 | u32 flags = 0 (reserved)                               |
// |     16 |    8 | u64 header offset = 64                                 |
// |     24 |    8 | u64 header length H                                    |
// |     32 |    8 | u64 blob offset (multiple of 64, >= 64 + H)            |
// |     40 |    8 | u64 blob length B                                      |
// |     48 |    8 | u64 file length (= blob offset + B)                    |
// |     56 |    8 | u64 FNV-1a 64 of the header bytes                      |
// |     64 |    H | header region: v3 the profile table, then one msgpack |
// |        |      | map a profile; v2 one msgpack map (one profile)        |
// |      … |  pad | zero bytes up to the blob offset                       |
// |   blob |    B | weights, each tensor 64-byte aligned from blob start   |
// All integers little-endian.
//
// Profile table (v3), at the start of the header region (byte 64):
// | +0 | 4 | u32 profile count P (1..kMaxProfiles)                           |
// | +4 | 4 | u32 reserved = 0                                                 |
// | +8 | 16 x P | per profile: u64 offset (from the file start), u64 length  |
//   of its msgpack header, inside the header region, in order, after the table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlane::plan_format {

inline constexpr char kMagic[8] = {'M', 'L', 'R', 'T', 'P', 'L', 'A', 'N'};
// 4: the header may lay Concat inputs in their output (arena.concatInPlace); 3: the profile
// table (as in 4), still read.
inline constexpr uint32_t kVersion = 4;
// The single-profile layout (the header region is one msgpack map), still read.
inline constexpr uint32_t kVersionSingle = 2;
inline constexpr uint32_t kMaxProfiles = 64;
// Profile table field offsets, from the start of the header region.
inline constexpr size_t kOffProfileCount = 0;
inline constexpr size_t kOffProfileReserved = 4;
inline constexpr size_t kOffProfileEntries = 8;
inline constexpr size_t kProfileEntryBytes = 16;
inline constexpr uint64_t kPreambleBytes = 64;
inline constexpr uint64_t kHeaderOffset = 64;
inline constexpr uint64_t kAlignment = 64;

// Field offsets inside the 64-byte preamble.
inline constexpr size_t kOffMagic = 0;
inline constexpr size_t kOffVersion = 8;
inline constexpr size_t kOffFlags = 12;
inline constexpr size_t kOffHeaderOffset = 16;
inline constexpr size_t kOffHeaderLength = 24;
inline constexpr size_t kOffBlobOffset = 32;
inline constexpr size_t kOffBlobLength = 40;
inline constexpr size_t kOffFileLength = 48;
inline constexpr size_t kOffHeaderHash = 56;

inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

inline uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = kFnvOffsetBasis;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

}  // namespace memlane::plan_format
