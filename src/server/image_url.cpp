#include "server/image_url.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <boost/asio/ip/address.hpp>

#include "core/error.h"

namespace pagoda::server {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

bool host_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool ipv4_public(const std::array<unsigned char, 4>& b) {
    const auto in = [&](unsigned a, unsigned b1_lo, unsigned b1_hi) { return b[0] == a && b[1] >= b1_lo && b[1] <= b1_hi; };
    if (b[0] == 0 || b[0] == 10 || b[0] == 127) return false;  // "this network", private, loopback
    if (in(100, 64, 127)) return false;                        // carrier-grade NAT
    if (in(169, 254, 254)) return false;                       // link-local (cloud metadata services)
    if (in(172, 16, 31)) return false;                         // private
    if (b[0] == 192 && b[1] == 168) return false;              // private
    if (b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2)) return false;  // IETF, TEST-NET-1
    if (in(198, 18, 19)) return false;                         // benchmarking
    if (b[0] == 198 && b[1] == 51 && b[2] == 100) return false;  // TEST-NET-2
    if (b[0] == 203 && b[1] == 0 && b[2] == 113) return false;   // TEST-NET-3
    if (b[0] >= 224) return false;                             // multicast, reserved, broadcast
    return true;
}

}  // namespace

bool is_http_url(std::string_view url) { return starts_with_ci(url, "http://") || starts_with_ci(url, "https://"); }

HttpUrl parse_http_url(std::string_view url) {
    HttpUrl out;
    std::string_view rest;
    if (starts_with_ci(url, "https://")) {
        out.https = true;
        rest = url.substr(8);
    } else if (starts_with_ci(url, "http://")) {
        rest = url.substr(7);
    } else {
        fail("not an http:// or https:// URL");
    }
    if (url.size() > 8192) fail("the URL is longer than 8192 characters");
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) fail("the URL holds a space or a control character");
    const size_t end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end);
    std::string_view tail = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
    if (authority.find('@') != std::string_view::npos) fail("URLs with user:password@ are not fetched");
    std::string_view port;
    bool has_port = false;
    if (!authority.empty() && authority[0] == '[') {
        const size_t close = authority.find(']');
        if (close == std::string_view::npos) fail("an IPv6 host without its closing ']'");
        out.host = std::string(authority.substr(1, close - 1));
        boost::system::error_code ec;
        boost::asio::ip::make_address_v6(out.host, ec);
        if (ec) fail("'{}' is not an IPv6 address", out.host);
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') fail("unexpected text after the IPv6 host");
            port = after.substr(1);
            has_port = true;
        }
    } else {
        const size_t colon = authority.rfind(':');
        out.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = authority.substr(colon + 1);
            has_port = true;
        }
        if (!std::all_of(out.host.begin(), out.host.end(), host_char)) fail("the host '{}' holds characters a host name cannot", out.host);
        out.host = lower(out.host);
    }
    if (out.host.empty()) fail("the URL has no host");
    out.port = out.https ? 443 : 80;
    if (has_port) {
        if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
            fail("the port '{}' is not a number", std::string(port));
        const int p = std::stoi(std::string(port));
        if (p < 1 || p > 65535) fail("the port {} is out of range", p);
        out.port = uint16_t(p);
    }
    tail = tail.substr(0, tail.find('#'));  // a fragment is not sent
    out.target = tail.empty() || tail[0] != '/' ? "/" + std::string(tail) : std::string(tail);
    return out;
}

HttpUrl resolve_redirect(const HttpUrl& base, std::string_view location) {
    if (is_http_url(location)) return parse_http_url(location);
    if (location.substr(0, 2) == "//") return parse_http_url(std::string(base.https ? "https:" : "http:") + std::string(location));
    if (!location.empty() && location[0] == '/') {
        const std::string host = base.host.find(':') != std::string::npos ? "[" + base.host + "]" : base.host;
        return parse_http_url(std::string(base.https ? "https://" : "http://") + host + ":" + std::to_string(base.port) +
                              std::string(location));
    }
    fail("a redirect to '{}', which is not an http(s) URL or an absolute path", std::string(location.substr(0, 200)));
}

bool is_public_address(std::string_view text) {
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(std::string(text), ec);
    if (ec) return false;
    if (address.is_v4()) return ipv4_public(address.to_v4().to_bytes());
    const auto v6 = address.to_v6();
    if (v6.is_v4_mapped()) return ipv4_public(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_bytes());
    const auto b = v6.to_bytes();
    if (v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || v6.is_link_local() || v6.is_site_local()) return false;
    if ((b[0] & 0xfe) == 0xfc) return false;  // unique local fc00::/7
    // IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) embed an IPv4 address.
    if (std::all_of(b.begin(), b.begin() + 12, [](unsigned char c) { return c == 0; }))
        return ipv4_public({b[12], b[13], b[14], b[15]});
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) return ipv4_public({b[12], b[13], b[14], b[15]});
    if (b[0] == 0x20 && b[1] == 0x02) return ipv4_public({b[2], b[3], b[4], b[5]});
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return false;  // documentation 2001:db8::/32
    return true;
}

}  // namespace pagoda::server
