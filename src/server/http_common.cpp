#include "server/http_common.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace pagoda::server::transport {

std::chrono::milliseconds millis(double seconds) {
    return std::chrono::milliseconds(int64_t(std::max(0.0, seconds) * 1000.0));
}

bool valid_request_id(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}

bool has_obs_fold(std::string_view block) {
    for (size_t at = block.find("\r\n"); at != std::string_view::npos; at = block.find("\r\n", at + 2))
        if (at + 2 < block.size() && (block[at + 2] == ' ' || block[at + 2] == '\t')) return true;
    return false;
}

std::string percent_decode(std::string_view s) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::string format_head(int status, const std::vector<Header>& headers, const std::vector<Header>& more) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status,
                                  std::string_view(http::obsolete_reason(http::int_to_status(unsigned(status)))));
    for (const auto& h : headers) out += h.name + ": " + h.value + "\r\n";
    for (const auto& h : more) out += h.name + ": " + h.value + "\r\n";
    out += "\r\n";
    return out;
}

std::string http_chunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

}  // namespace pagoda::server::transport
