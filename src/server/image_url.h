// Remote image URLs (`serve --allow-image-urls`): the http(s) URL grammar the fetcher takes, and
// the address check that keeps a request from making the server reach its own network (SSRF).
// Pure (no sockets), so the request parsers and the fuzz targets use it. parse_http_url accepts
// http:// and https:// URLs with a host (a name, an IPv4 address or a bracketed IPv6 address), an
// optional port 1-65535, and a path/query (no fragment sent, no user:password@, no spaces or
// control characters); anything else throws pagoda::Error naming the problem.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::server {

struct HttpUrl {
    bool https = false;
    std::string host;    // without brackets for IPv6
    uint16_t port = 0;   // the scheme's default when absent
    std::string target;  // "/path?query", at least "/"
};

bool is_http_url(std::string_view url);  // starts with http:// or https:// (any case)
HttpUrl parse_http_url(std::string_view url);
// A redirect's Location against the URL it answered: absolute (http/https), scheme-relative
// ("//host/p") or path-absolute ("/p"); other forms throw.
HttpUrl resolve_redirect(const HttpUrl& base, std::string_view location);

// True for an address a fetch may reach without --image-url-allow-private: not loopback, private
// (RFC 1918, fc00::/7), link-local, carrier-grade NAT, unspecified, multicast, broadcast,
// documentation/benchmark ranges, or an IPv4-mapped/compatible IPv6 form of one. `address` is the
// numeric text; anything that is not an address is not public.
bool is_public_address(std::string_view address);

}  // namespace pagoda::server
