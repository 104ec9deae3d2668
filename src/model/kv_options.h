// How a user sizes the paged KV cache: block size, element type and a memory budget given as a size
// with a unit ("512MiB", "8GiB", "2G", "1073741824B"; K, M, G, T are powers of 1024 however
// spelled) or as a fraction of the machine's available memory ("0.9", "90%"). A bare whole number
// ("1") is refused: it would be one byte to some readers and all of memory to others.
// The same flags appear on `run`, `serve` and the benchmarks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kv/kv_layout.h"

namespace pagoda::model {

struct KvOptions {
    int32_t block_size = kv::kDefaultBlockSize;
    std::optional<kv::KvDtype> dtype;  // unset: F32 for F32 weights, else F16
    std::string memory;                // unset/empty: enough for the requested tokens
    bool prefix_caching = true;
};

// Parses a --kv-memory value (or another flag's, named in errors) into bytes. Throws pagoda::Error,
// saying which forms are accepted, on a malformed, unit-less, zero or out-of-range value. A fraction
// is of `fraction_of` bytes (a device backend's memory), or of the host's available memory when 0.
uint64_t parse_memory_budget(const std::string& text, const char* flag = "--kv-memory", uint64_t fraction_of = 0);
// Whether a budget is a fraction ("0.9", "90%") rather than a size.
bool is_fractional_budget(const std::string& text);

// Blocks for the options: from the memory budget if given (a fraction of `fraction_of` bytes, as
// parse_memory_budget), else enough for `tokens_wanted` tokens. Throws when the budget cannot hold a
// single block.
int64_t kv_block_count(const KvOptions& options, const kv::KvLayout& layout, int64_t tokens_wanted,
                       uint64_t fraction_of = 0);

}  // namespace pagoda::model
