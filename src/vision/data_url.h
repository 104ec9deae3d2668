// `data:` URLs as chat APIs carry images (RFC 2397): data:[<media type>][;param=value]*;base64,<data>.
// Contract: parse_data_url returns the media type (lower-cased; "" when absent) and the decoded
// bytes, or throws pagoda::Error naming `what` and the problem: not a data: URL, no ";base64"
// (percent-encoded payloads are refused by name), invalid base64 (the offset of the first bad
// character), or a payload over max_bytes (checked on the encoded length, before decoding).
// Base64 is RFC 4648's standard alphabet; '=' padding is optional, whitespace is refused.
// decode_data_url_image also checks that the media type, when given, is an image/ type, then
// decodes the bytes (the bytes' magic number decides the format, as browsers do).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vision/image.h"

namespace pagoda::vision {

struct DataUrl {
    std::string media_type;
    std::vector<uint8_t> bytes;
};

DataUrl parse_data_url(std::string_view url, uint64_t max_bytes, std::string_view what);

Image decode_data_url_image(std::string_view url, const DecodeLimits& limits, std::string_view what);

}  // namespace pagoda::vision
