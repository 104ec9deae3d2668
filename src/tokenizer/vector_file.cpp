#include "tokenizer/vector_file.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace pagoda::tokenizer {

std::vector<std::string> split_vector_cases(std::string_view content) {
    std::vector<std::string> cases;
    size_t start = 0;
    while (true) {
        size_t sep = content.find(kVectorSeparator, start);
        if (sep == std::string_view::npos) break;
        cases.emplace_back(content.substr(start, sep - start));
        start = sep + kVectorSeparator.size();
    }
    if (start < content.size()) cases.emplace_back(content.substr(start));
    return cases;
}

std::string format_vector_ids(const std::vector<int32_t>& ids) {
    std::string line;
    for (int32_t id : ids) {
        line += ' ';
        line += std::to_string(id);
    }
    return line;
}

std::vector<std::vector<int32_t>> parse_vector_ids(std::string_view content) {
    std::vector<std::vector<int32_t>> lines;
    size_t start = 0;
    while (start < content.size()) {
        size_t end = content.find('\n', start);
        if (end == std::string_view::npos) end = content.size();
        std::string_view line = content.substr(start, end - start);
        std::vector<int32_t> ids;
        size_t pos = 0;
        while (pos < line.size()) {
            if (line[pos] == ' ') {
                ++pos;
                continue;
            }
            int32_t id = 0;
            auto [ptr, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), id);
            if (ec != std::errc() || ptr == line.data() + pos)
                fail("line {}: '{}' is not a list of token ids", lines.size() + 1, line);
            ids.push_back(id);
            pos = ptr - line.data();
        }
        lines.push_back(std::move(ids));
        start = end + 1;
    }
    return lines;
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open '{}': {}", path, std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) fail("cannot read '{}'", path);
    return ss.str();
}

}  // namespace pagoda::tokenizer
