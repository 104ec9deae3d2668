// What a request's headers say before its body is trusted: the caller's credentials (a bearer
// token in Authorization, or Anthropic's x-api-key, which counts as one), and the header checks
// whose failure must close the connection because the body's extent is unknown or untrusted
// (Transfer-Encoding other than one plain "chunked", more than one Authorization header).
#pragma once
#include <optional>
#include <string>

#include "server/http_common.h"

namespace pagoda::server::transport {

// The Authorization header's value, or "Bearer <x-api-key>" when only x-api-key is sent; "" for none.
std::string request_credentials(const http::request<http::string_body>& request);

// A 400 for a header block that must not be served (then the connection closes), or nullopt.
std::optional<ApiError> refuse_header(const http::request<http::string_body>& request);

}  // namespace pagoda::server::transport
