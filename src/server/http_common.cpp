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

std::string format_head(int status, const std::vector<Header>& headers) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status,
                                  std::string_view(http::obsolete_reason(http::int_to_status(unsigned(status)))));
    for (const auto& h : headers) out += h.name + ": " + h.value + "\r\n";
    out += "\r\n";
    return out;
}

std::string http_chunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

}  // namespace pagoda::server::transport
