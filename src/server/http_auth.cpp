#include "server/http_auth.h"

#include <fmt/format.h>

namespace pagoda::server::transport {
namespace {

std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

}  // namespace

std::string request_credentials(const http::request<http::string_body>& req) {
    std::string auth(req[http::field::authorization]);
    if (auth.empty() && !req["x-api-key"].empty()) auth = "Bearer " + std::string(req["x-api-key"]);
    return auth;
}

std::optional<ApiError> refuse_header(const http::request<http::string_body>& req) {
    int codings = 0;
    const auto [first, last] = req.equal_range(http::field::transfer_encoding);
    for (auto f = first; f != last; ++f) {
        ++codings;
        if (codings > 1 || !beast::iequals(trim(f->value()), "chunked"))
            // Anything but one plain "chunked" would leave the body's end to guesswork (RFC 9112
            // section 6.1: answer 400 and close), which is how requests get smuggled.
            return ApiError::invalid(fmt::format("Transfer-Encoding '{}' is not supported; send the body with "
                                                 "Content-Length or 'Transfer-Encoding: chunked'",
                                                 std::string(f->value())),
                                     {}, "invalid_header");
    }
    if (req.count(http::field::authorization) > 1)
        return ApiError::invalid("the request has more than one Authorization header; send one", {}, "invalid_header");
    return std::nullopt;
}

}  // namespace pagoda::server::transport
