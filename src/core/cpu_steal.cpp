#include "core/cpu_steal.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace pagoda {

std::optional<CpuTicks> parse_proc_stat(std::string_view text) {
    // The aggregate line is "cpu" followed by spaces; per-CPU lines are "cpu0", "cpu1", ...
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos) eol = text.size();
        std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.size() < 4 || line.substr(0, 4) != "cpu ") continue;
        CpuTicks t;
        int fields = 0;
        size_t i = 3;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ') ++i;
            if (i >= line.size()) break;
            uint64_t v = 0;
            const auto [end, ec] = std::from_chars(line.data() + i, line.data() + line.size(), v);
            if (ec != std::errc() || (end != line.data() + line.size() && *end != ' ')) return std::nullopt;
            i = size_t(end - line.data());
            ++fields;
            // Fields 9 and 10 (guest, guest_nice) are already counted in user and nice.
            if (fields <= 8) {
                if (t.total > UINT64_MAX - v) return std::nullopt;
                t.total += v;
            }
            if (fields == 8) t.steal = v;
        }
        if (fields < 4) return std::nullopt;  // user nice system idle at the least
        return t;
    }
    return std::nullopt;
}

std::optional<CpuTicks> read_cpu_ticks() {
    std::ifstream in("/proc/stat");
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return parse_proc_stat(text.str());
}

void StealMeter::begin() { start_ = read_cpu_ticks(); }

void StealMeter::end() {
    if (!start_) return;
    const std::optional<CpuTicks> now = read_cpu_ticks();
    if (!now || now->total < start_->total || now->steal < start_->steal) {
        start_.reset();
        return;
    }
    total_ += now->total - start_->total;
    steal_ += now->steal - start_->steal;
    known_ = true;
    start_.reset();
}

}  // namespace pagoda
