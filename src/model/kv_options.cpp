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

}  // namespace

uint64_t parse_memory_budget(const std::string& text) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string number = text.substr(0, i);
    std::string unit = text.substr(i);
    for (auto& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    double value = 0;
    try {
        size_t used = 0;
        value = std::stod(number, &used);
        if (used != number.size()) throw std::invalid_argument(number);
    } catch (const std::exception&) {
        fail("--kv-memory '{}' is not a size (e.g. 512MiB, 2G, 0.25 for a fraction of free memory)", text);
    }
    if (unit.empty() && value > 0 && value <= 1 && number.find('.') != std::string::npos)
        return uint64_t(value * double(available_memory_bytes()));
    double scale = 0;
    if (unit.empty() || unit == "b") scale = 1;
    else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
    else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
    else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
    else fail("--kv-memory '{}': unknown unit '{}' (use B, KiB, MiB or GiB)", text, unit);
    double bytes = value * scale;
    if (!(bytes >= 1) || bytes > 1e15) fail("--kv-memory '{}' is out of range", text);
    return uint64_t(bytes);
}

int64_t kv_block_count(const KvOptions& options, const kv::KvLayout& layout, int64_t tokens_wanted) {
    if (!options.memory.empty()) {
        uint64_t bytes = parse_memory_budget(options.memory);
        int64_t blocks = kv::blocks_for_budget(bytes, layout);
        if (blocks < 1)
            fail("--kv-memory {} cannot hold one KV block ({} bytes at block size {})", options.memory,
                 layout.bytes_per_block(), layout.block_size);
        return blocks;
    }
    return std::max<int64_t>(1, (tokens_wanted + layout.block_size - 1) / layout.block_size);
}

}  // namespace pagoda::model
