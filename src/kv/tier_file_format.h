// The on-disk form of one prefix-tier block (file_block_store.h writes and reads it):
//
//   offset  size  field
//        0     8  magic "PAGODAKV"
//        8     4  format version (kTierFileVersion)
//       12     4  header bytes (128)
//       16     8  identity digest (TierIdentity::digest)
//       24     8  model key
//       32    20  layout: layers, KV heads, head dim, block size, element type (int32 each)
//       52     4  backend name length (<= 32), then 32 bytes of name at 56
//       88     8  block hash      96  8  parent hash      104  8  extra key
//      112     8  payload bytes
//      120     8  checksum64 of the tokens followed by the payload
//      128        block_size int32 tokens, then the payload
//
// Integers are in host byte order (little-endian on every CPU pagoda builds for; a file from a
// big-endian machine fails the version check). Nothing in a file is trusted before every check in
// decode_tier_file passed: identity, layout, hash (and that the hash is that of the stored tokens),
// exact length and checksum.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/tier_block.h"

namespace pagoda::kv {

constexpr uint32_t kTierFileVersion = 1;
constexpr size_t kTierFileHeaderBytes = 128;

std::vector<uint8_t> encode_tier_file(const TierIdentity& identity, const TierBlock& block);

// What the header of a file says, read without the payload (the directory scan).
struct TierFileHeader {
    uint64_t identity_digest = 0;
    uint64_t hash = 0;
    uint64_t file_bytes = 0;  // the length the whole file must have
};
// Parses the first kTierFileHeaderBytes of a file. Returns an empty string when they form a valid
// header, else why not ("bad magic", "format version 7, expected 1", ...).
std::string parse_tier_header(std::span<const uint8_t> head, TierFileHeader& out);

// Decodes a whole file for `expect` and block `hash`. On any defect returns null and says why in
// `error` (foreign model, foreign layout, wrong hash, truncated, checksum mismatch, ...).
std::shared_ptr<TierBlock> decode_tier_file(std::span<const uint8_t> bytes, const TierIdentity& expect, uint64_t hash,
                                            std::string& error);

}  // namespace pagoda::kv
