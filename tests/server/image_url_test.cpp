// Remote image URLs: the http(s) grammar (image_url.h), redirects' Location forms, and the
// address check that keeps a fetch off the server's own network.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/image_url.h"

namespace pagoda::server {
namespace {

TEST(ImageUrl, ParsesHostPortAndTarget) {
    HttpUrl u = parse_http_url("https://Example.COM/cat.png?size=2#frag");
    EXPECT_TRUE(u.https);
    EXPECT_EQ(u.host, "example.com");
    EXPECT_EQ(u.port, 443);
    EXPECT_EQ(u.target, "/cat.png?size=2");
    u = parse_http_url("HTTP://127.0.0.1:8080");
    EXPECT_FALSE(u.https);
    EXPECT_EQ(u.host, "127.0.0.1");
    EXPECT_EQ(u.port, 8080);
    EXPECT_EQ(u.target, "/");
    u = parse_http_url("http://[::1]:9/x");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.port, 9);
    EXPECT_EQ(u.target, "/x");
    u = parse_http_url("http://host?q");
    EXPECT_EQ(u.target, "/?q");
    EXPECT_TRUE(is_http_url("HTTPS://x"));
    EXPECT_FALSE(is_http_url("data:image/png;base64,AA"));
}

TEST(ImageUrl, RefusesMalformedUrlsByTheirProblem) {
    auto refused = [](const std::string& url, const std::string& words) {
        try {
            parse_http_url(url);
            ADD_FAILURE() << "accepted " << url;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << url << ": " << e.what();
        }
    };
    refused("ftp://example.com/a", "not an http:// or https:// URL");
    refused("http:///a.png", "no host");
    refused("http://u:p@example.com/", "user:password@");
    refused("http://example.com:0/", "out of range");
    refused("http://example.com:70000/", "out of range");
    refused("http://example.com:/", "not a number");
    refused("http://example.com:8x/", "not a number");
    refused("http://[::1/", "closing ']'");
    refused("http://[zz]/", "not an IPv6 address");
    refused("http://exa%mple.com/", "cannot");
    refused("http://example.com/a b", "space or a control character");
    refused("http://example.com/\x01", "space or a control character");
}

TEST(ImageUrl, RedirectLocationsResolveAgainstTheirUrl) {
    const HttpUrl base = parse_http_url("http://a.example:8080/dir/x.png");
    HttpUrl r = resolve_redirect(base, "/y.png");
    EXPECT_EQ(r.host, "a.example");
    EXPECT_EQ(r.port, 8080);
    EXPECT_EQ(r.target, "/y.png");
    r = resolve_redirect(base, "//b.example/z");
    EXPECT_EQ(r.host, "b.example");
    EXPECT_EQ(r.port, 80);
    r = resolve_redirect(base, "https://c.example/w");
    EXPECT_TRUE(r.https);
    EXPECT_EQ(r.host, "c.example");
    EXPECT_THROW(resolve_redirect(base, "relative.png"), Error);
    EXPECT_THROW(resolve_redirect(base, "file:///etc/passwd"), Error);
    r = resolve_redirect(parse_http_url("http://[::1]:5/a"), "/b");
    EXPECT_EQ(r.host, "::1");
    EXPECT_EQ(r.port, 5);
}

TEST(ImageUrl, OnlyPublicAddressesArePublic) {
    for (const char* a : {"8.8.8.8", "1.1.1.1", "93.184.216.34", "2001:4860:4860::8888", "2606:4700::1111"})
        EXPECT_TRUE(is_public_address(a)) << a;
    for (const char* a : {"127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                          "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.2.1",
                          "198.18.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1",
                          "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::",
                          "2001:db8::1", "localhost", "not an address", ""})
        EXPECT_FALSE(is_public_address(a)) << a;
    EXPECT_TRUE(is_public_address("172.32.0.1"));
    EXPECT_TRUE(is_public_address("::ffff:8.8.8.8"));
}

}  // namespace
}  // namespace pagoda::server
