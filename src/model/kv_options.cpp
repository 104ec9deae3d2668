#include "model/kv_options.h"

#include <cctype>
#include <cmath>
#include <fstream>

#include "core/error.h"

namespace pagoda::model {
namespace {

uint64_t available_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t value = 0;
    while (in >> key >> value >> unit)
        if (key == "MemAvailable:") return value * 1024;
    fail("cannot read MemAvailable from /proc/meminfo to size a fractional --kv-memory");
}

const char* const kMemoryForms = "512MiB, 8GiB, 2G, 1073741824B, or a fraction of free memory: 0.9 or 90%";

// Bytes per unit; binary multiples whichever spelling (K, KB, KiB are all 1024). 0: not a unit.
double unit_scale(std::string unit) {
    for (auto& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (unit == "b") return 1;
    if (unit == "k" || unit == "kb" || unit == "kib") return 1024.0;
    if (unit == "m" || unit == "mb" || unit == "mib") return 1024.0 * 1024;
    if (unit == "g" || unit == "gb" || unit == "gib") return 1024.0 * 1024 * 1024;
    if (unit == "t" || unit == "tb" || unit == "tib") return 1024.0 * 1024 * 1024 * 1024;
    return 0;
}

uint64_t fraction_of_free_memory(const std::string& text, double fraction, const char* flag, uint64_t of) {
    if (!(fraction > 0) || fraction > 1)
        fail("{} '{}': a fraction of free memory must be above 0 and at most 1 (100%)", flag, text);
    return uint64_t(fraction * double(of > 0 ? of : available_memory_bytes()));
}

}  // namespace

bool is_fractional_budget(const std::string& text) {
    return !text.empty() && (text.back() == '%' || (text.find('.') != std::string::npos &&
                                                   text.find_first_not_of("0123456789.") == std::string::npos));
}

uint64_t parse_memory_budget(const std::string& text, const char* flag, uint64_t fraction_of) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string number = text.substr(0, i), unit = text.substr(i);
    double value = 0;
    try {
        size_t used = 0;
        value = std::stod(number, &used);
        if (used != number.size()) throw std::invalid_argument(number);
    } catch (const std::exception&) {
        fail("{} '{}' is not a size (use {})", flag, text, kMemoryForms);
    }
    if (unit == "%") return fraction_of_free_memory(text, value / 100, flag, fraction_of);
    if (unit.empty()) {
        if (number.find('.') != std::string::npos) return fraction_of_free_memory(text, value, flag, fraction_of);
        fail("{} '{}' has no unit: bytes or a fraction? (use {})", flag, text, kMemoryForms);
    }
    const double scale = unit_scale(unit);
    if (scale == 0) fail("{} '{}': unknown unit '{}' (use B, KiB, MiB, GiB or TiB, or %)", flag, text, unit);
    const double bytes = value * scale;
    if (!(bytes >= 1) || bytes > 1e15) fail("{} '{}' is out of range", flag, text);
    return uint64_t(bytes);
}

int64_t kv_block_count(const KvOptions& options, const kv::KvLayout& layout, int64_t tokens_wanted,
                       uint64_t fraction_of) {
    if (!options.memory.empty()) {
        uint64_t bytes = parse_memory_budget(options.memory, "--kv-memory", fraction_of);
        int64_t blocks = kv::blocks_for_budget(bytes, layout);
        if (blocks < 1)
            fail("--kv-memory {} cannot hold one KV block ({} bytes at block size {})", options.memory,
                 layout.bytes_per_block(), layout.block_size);
        return blocks;
    }
    return std::max<int64_t>(1, (tokens_wanted + layout.block_size - 1) / layout.block_size);
}

}  // namespace pagoda::model
