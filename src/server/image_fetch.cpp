#include "server/image_fetch.h"

#include <exception>
#include <optional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "server/api_error.h"
#include "server/image_url.h"

namespace pagoda::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

struct Answer {
    unsigned status = 0;
    std::string location, content_type;
    std::vector<uint8_t> body;
};

// The checked endpoints of `url`'s host: the public ones, or all with allow_private.
net::awaitable<std::vector<tcp::endpoint>> resolve(const HttpUrl& url, const ImageFetchOptions& o) {
    tcp::resolver resolver(co_await net::this_coro::executor);
    auto results = co_await resolver.async_resolve(url.host, std::to_string(url.port), net::use_awaitable);
    std::vector<tcp::endpoint> out;
    std::string refused;
    for (const auto& r : results) {
        const std::string address = r.endpoint().address().to_string();
        if (o.allow_private || is_public_address(address)) out.push_back(r.endpoint());
        else if (refused.empty()) refused = address;
    }
    if (out.empty())
        fail("'{}' resolves to a private, loopback or reserved address ({}), which is not fetched", url.host, refused);
    co_return out;
}

template <class Stream>
net::awaitable<Answer> exchange(Stream& stream, const HttpUrl& url, const ImageFetchOptions& o) {
    http::request<http::empty_body> request{http::verb::get, url.target, 11};
    const bool default_port = url.port == (url.https ? 443 : 80);
    const std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
    request.set(http::field::host, default_port ? host : host + ":" + std::to_string(url.port));
    request.set(http::field::user_agent, "pagoda");
    request.set(http::field::accept, "image/*");
    co_await http::async_write(stream, request, net::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::vector_body<uint8_t>> parser;
    parser.body_limit(o.max_bytes);
    parser.header_limit(64 * 1024);
    co_await http::async_read_header(stream, buffer, parser, net::use_awaitable);
    Answer a;
    a.status = parser.get().result_int();
    a.location = std::string(parser.get()[http::field::location]);
    a.content_type = std::string(parser.get()[http::field::content_type]);
    if (a.status == 200) {
        co_await http::async_read(stream, buffer, parser, net::use_awaitable);
        a.body = std::move(parser.get().body());
    }
    co_return a;
}

net::awaitable<Answer> get(const HttpUrl& url, const ImageFetchOptions& o, ssl::context& tls) {
    const std::vector<tcp::endpoint> endpoints = co_await resolve(url, o);
    auto executor = co_await net::this_coro::executor;
    if (!url.https) {
        beast::tcp_stream stream(executor);
        co_await net::async_connect(stream.socket(), endpoints, net::use_awaitable);
        co_return co_await exchange(stream, url, o);
    }
    beast::ssl_stream<beast::tcp_stream> stream(executor, tls);
    if (!SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str())) fail("TLS: cannot set the server name");
    stream.set_verify_callback(ssl::host_name_verification(url.host));
    co_await net::async_connect(beast::get_lowest_layer(stream).socket(), endpoints, net::use_awaitable);
    co_await stream.async_handshake(ssl::stream_base::client, net::use_awaitable);
    co_return co_await exchange(stream, url, o);
}

bool redirect_status(unsigned s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

std::string media_type(const std::string& content_type) {
    std::string out = content_type.substr(0, content_type.find(';'));
    while (!out.empty() && out.back() == ' ') out.pop_back();
    for (auto& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Follows redirects; throws pagoda::Error (or a system error) describing the failure.
net::awaitable<std::vector<uint8_t>> fetch(HttpUrl url, const ImageFetchOptions& o, ssl::context& tls) {
    for (int redirects = 0;; ++redirects) {
        Answer a = co_await get(url, o, tls);
        if (redirect_status(a.status)) {
            if (redirects == o.max_redirects) fail("more than {} redirects", o.max_redirects);
            if (a.location.empty()) fail("HTTP {} without a Location", a.status);
            url = resolve_redirect(url, a.location);
            continue;
        }
        if (a.status != 200) fail("HTTP {}", a.status);
        const std::string type = media_type(a.content_type);
        if (type.rfind("image/", 0) != 0)
            fail("the content type is '{}', not an image", type.empty() ? "(none)" : type.substr(0, 100));
        co_return std::move(a.body);
    }
}

}  // namespace

std::vector<uint8_t> fetch_image_url(const std::string& url, const ImageFetchOptions& o, const std::string& where,
                                     const std::string& param) {
    auto refuse = [&](const std::string& why) {
        return ApiError::invalid(fmt::format("'{}': the image URL {} could not be fetched: {}", where,
                                             url.substr(0, 300), why),
                                 param, "invalid_image_url");
    };
    HttpUrl parsed;
    try {
        parsed = parse_http_url(url);
    } catch (const std::exception& e) {
        throw refuse(e.what());
    }
    ssl::context tls(ssl::context::tls_client);
    tls.set_default_verify_paths();
    tls.set_verify_mode(ssl::verify_peer);
    std::optional<std::vector<uint8_t>> bytes;  // before the io_context: its handlers refer to them
    std::exception_ptr error;
    net::io_context ioc;
    net::co_spawn(ioc, fetch(parsed, o, tls), [&](std::exception_ptr e, std::vector<uint8_t> body) {
        if (e) error = e;
        else bytes = std::move(body);
    });
    ioc.run_for(o.timeout);
    if (!bytes && !error) throw refuse(fmt::format("no answer within {} ms", o.timeout.count()));
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const boost::system::system_error& e) {
            if (e.code() == http::error::body_limit)
                throw refuse(fmt::format("the image is over the limit of {} bytes", o.max_bytes));
            throw refuse(e.code().message());
        } catch (const std::exception& e) {
            throw refuse(e.what());
        }
    }
    return std::move(*bytes);
}

}  // namespace pagoda::server
