#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace pagoda::server {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return out;
}

// scheme "://" host [":" port], with no path, query, user info or white space.
bool looks_like_origin(std::string_view o) {
    const size_t colon = o.find("://");
    if (colon == std::string_view::npos || colon == 0) return false;
    for (char c : o.substr(0, colon))
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
    const std::string_view rest = o.substr(colon + 3);
    if (rest.empty()) return false;
    for (char c : rest)
        if (c == '/' || c == '?' || c == '#' || c == '@' || static_cast<unsigned char>(c) <= ' ') return false;
    return true;
}

// A header-name list as browsers send it: tokens separated by commas and spaces.
bool plain_header_list(std::string_view v) {
    if (v.size() > 2048) return false;
    for (char c : v)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != ',' && c != ' ') return false;
    return true;
}

}  // namespace

CorsPolicy::CorsPolicy(const std::vector<std::string>& origins) {
    for (std::string o : origins) {
        o.erase(0, o.find_first_not_of(" \t"));
        o.erase(o.find_last_not_of(" \t") + 1);
        if (o == "*") {
            any_ = true;
            continue;
        }
        if (!o.empty() && o.back() == '/') o.pop_back();
        if (!looks_like_origin(o))
            fail("--cors-origin '{}' is not an origin: give scheme://host[:port] (e.g. http://localhost:3000) or *", o);
        origins_.push_back(lower(o));
    }
}

bool CorsPolicy::allows(std::string_view origin) const {
    if (origin.empty()) return false;
    if (any_) return true;
    return std::find(origins_.begin(), origins_.end(), lower(origin)) != origins_.end();
}

std::vector<CorsHeader> CorsPolicy::answer_headers(std::string_view origin) const {
    if (!enabled()) return {};
    std::vector<CorsHeader> out;
    if (allows(origin)) {
        out.push_back({"Access-Control-Allow-Origin", any_ ? "*" : std::string(origin)});
        // Scripts may read these; the others a CORS response exposes anyway (Content-Type, ...).
        out.push_back({"Access-Control-Expose-Headers", "X-Request-Id, Retry-After"});
    }
    out.push_back({"Vary", "Origin"});
    return out;
}

std::vector<CorsHeader> CorsPolicy::preflight_headers(std::string_view origin, std::string_view requested) const {
    std::vector<CorsHeader> out = answer_headers(origin);
    if (!allows(origin)) return out;
    out.push_back({"Access-Control-Allow-Methods", "GET, POST, OPTIONS"});
    // The official clients send their own headers (x-stainless-*); what the browser asks for is
    // allowed, since a key, not the header set, is what guards the API.
    const std::string headers = !requested.empty() && plain_header_list(requested)
                                    ? std::string(requested)
                                    : std::string("Authorization, Content-Type, X-Request-Id, X-Api-Key");
    out.push_back({"Access-Control-Allow-Headers", headers});
    out.push_back({"Access-Control-Max-Age", "600"});
    return out;
}

}  // namespace pagoda::server
