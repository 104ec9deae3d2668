// Cross-origin resource sharing for `serve --cors-origin`: which browser origins may call the API,
// and the Access-Control-* headers that tell the browser so. Off (no origins) by default: then no
// CORS header is ever written and OPTIONS is routed like any other method. An allowed Origin gets
// Access-Control-Allow-Origin (the origin itself, or * when any origin is allowed) and
// Access-Control-Expose-Headers on every answer; a preflight OPTIONS from it gets 204 with the
// allowed methods, the headers it asked for, and Max-Age. Every answer says Vary: Origin, since
// it depends on the Origin header.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::server {

struct CorsHeader {
    std::string name, value;
};

class CorsPolicy {
public:
    CorsPolicy() = default;
    // `origins`: "*" or scheme://host[:port] each (case-insensitive; a trailing "/" is dropped).
    // Throws pagoda::Error naming --cors-origin for anything else.
    explicit CorsPolicy(const std::vector<std::string>& origins);

    bool enabled() const { return any_ || !origins_.empty(); }
    bool allows(std::string_view origin) const;
    // Headers for an ordinary answer to a request with this Origin ("" when it sent none).
    std::vector<CorsHeader> answer_headers(std::string_view origin) const;
    // Headers for a preflight from an allowed origin; `requested_headers` is its
    // Access-Control-Request-Headers (echoed when it is a plain list of header names).
    std::vector<CorsHeader> preflight_headers(std::string_view origin, std::string_view requested_headers) const;

private:
    bool any_ = false;
    std::vector<std::string> origins_;  // lower case
};

}  // namespace pagoda::server
