// Fetching remote images for `serve --allow-image-urls`: one GET of an http:// or https:// URL
// (Boost.Beast client; HTTPS verifies the certificate and host name against the system's CAs),
// following at most `max_redirects` redirects, within `timeout` for the whole fetch (DNS, connect,
// TLS, redirects, body), refusing a body over `max_bytes` as it arrives and any content type but
// image/*. Every address a host resolves to that is not public (image_url.h) is skipped unless
// `allow_private` (SSRF: a request must not make the server reach its own network), and the
// connection goes only to the addresses checked, so a second DNS answer cannot swap them.
// Blocking: it runs on the request's thread, as the image's decoding and encoding do.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::server {

struct ImageFetchOptions {
    bool allow = false;                              // --allow-image-urls (off: URLs are refused)
    uint64_t max_bytes = uint64_t(20) << 20;         // --image-url-max-mb
    std::chrono::milliseconds timeout{10000};        // --image-url-timeout (seconds on the command line)
    int max_redirects = 3;
    bool allow_private = false;                      // --image-url-allow-private
};

// The image's bytes. Throws ApiError 400 naming `where`, the URL and what failed (param `param`).
std::vector<uint8_t> fetch_image_url(const std::string& url, const ImageFetchOptions& options, const std::string& where,
                                     const std::string& param);

}  // namespace pagoda::server
