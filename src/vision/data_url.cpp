// data: URL parsing and base64 (see data_url.h).
#include "vision/data_url.h"

#include <algorithm>
#include <cctype>

#include "core/base64.h"
#include "core/error.h"

namespace pagoda::vision {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

DataUrl parse_data_url(std::string_view url, uint64_t max_bytes, std::string_view what) {
    if (url.size() < 5 || lower(url.substr(0, 5)) != "data:") {
        const auto scheme_end = url.find(':');
        if (scheme_end != std::string_view::npos && scheme_end < 16)
            fail("{}: expected a data: URL, got a {}: URL", what, lower(url.substr(0, scheme_end)));
        fail("{}: expected a data: URL (data:image/png;base64,...)", what);
    }
    const auto comma = url.find(',');
    if (comma == std::string_view::npos) fail("{}: the data: URL has no ',' before its data", what);
    const std::string_view header = url.substr(5, comma - 5);
    const std::string_view payload = url.substr(comma + 1);
    // header: [media type] then ;-separated parameters, the last of which must be "base64".
    DataUrl out;
    const auto semi = header.find(';');
    out.media_type = lower(header.substr(0, semi));
    bool base64 = false;
    if (semi != std::string_view::npos) {
        std::string_view rest = header.substr(semi + 1);
        while (true) {
            const auto next = rest.find(';');
            const std::string_view param = rest.substr(0, next);
            if (lower(param) == "base64") {
                if (next != std::string_view::npos) fail("{}: in the data: URL, ';base64' must come last", what);
                base64 = true;
            }
            if (next == std::string_view::npos) break;
            rest = rest.substr(next + 1);
        }
    }
    if (!base64) fail("{}: the data: URL is not base64 (';base64,' expected; percent-encoded data is not supported)", what);
    // 4 characters carry 3 bytes: refuse before decoding anything too large.
    size_t chars = payload.size();
    for (int pad = 0; pad < 2 && chars > 0 && payload[chars - 1] == '='; ++pad) --chars;
    if (uint64_t(chars) * 3 / 4 > max_bytes)
        fail("{}: the data: URL carries {} bytes, over the limit of {} bytes", what, uint64_t(chars) * 3 / 4, max_bytes);
    out.bytes = decode_base64(payload, what);
    return out;
}

Image decode_data_url_image(std::string_view url, const DecodeLimits& limits, std::string_view what) {
    const DataUrl data = parse_data_url(url, limits.max_bytes, what);
    if (!data.media_type.empty() && data.media_type.rfind("image/", 0) != 0)
        fail("{}: the data: URL's media type is '{}', not an image/ type", what, data.media_type);
    return decode_image(data.bytes, limits, what);
}

}  // namespace pagoda::vision
