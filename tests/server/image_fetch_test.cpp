// fetch_image_url against a local HTTP server (so with allow_private, which is what lets a test
// reach 127.0.0.1): the bytes of a 200 image, redirects up to the limit, and every refusal as a 400
// naming the part, the URL and the failure: a non-image content type, an HTTP error, a body over
// the size cap, too many redirects, a server that does not answer in time, and a loopback address
// without allow_private (SSRF).
#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>

#include "server/api_error.h"
#include "server/image_fetch.h"
#include "server/threaded_test_server.h"

namespace pagoda::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, 'p');

// Answers each connection on a thread of its own, by the request's path.
class TestServer {
public:
    TestServer() : server_([this](tcp::socket s) { serve(std::move(s)); }) {}
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(server_.port()) + path; }

private:
    static std::string answer(int status, const std::string& type, const std::string& body, const std::string& extra = {}) {
        return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type + "\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra + "\r\n" + body;
    }
    void serve(tcp::socket socket) {
        boost::system::error_code ec;
        std::string request;
        net::read_until(socket, net::dynamic_buffer(request), "\r\n\r\n", ec);
        if (ec) return;
        const size_t sp = request.find(' ');
        const std::string path = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
        std::string out;
        if (path == "/img.png") out = answer(200, "image/png", kPng);
        else if (path == "/typed.png") out = answer(200, "Image/PNG; charset=binary", kPng);
        else if (path == "/page") out = answer(200, "text/html", "<html></html>");
        else if (path == "/big") out = answer(200, "image/png", std::string(3 << 20, 'b'));
        else if (path == "/missing") out = answer(404, "text/plain", "no");
        else if (path.rfind("/r/", 0) == 0) {  // /r/N redirects N more times, then to the image
            const int n = std::stoi(path.substr(3));
            out = answer(302, "text/plain", "", "Location: " + (n == 0 ? std::string("/img.png") : "/r/" + std::to_string(n - 1)) + "\r\n");
        } else if (path == "/slow") {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            out = answer(200, "image/png", kPng);
        } else out = answer(500, "text/plain", "?");
        net::write(socket, net::buffer(out), ec);
    }

    test::ThreadedTestServer server_;
};

ImageFetchOptions local() {
    ImageFetchOptions o;
    o.allow = true;
    o.allow_private = true;
    o.max_bytes = 1 << 20;
    o.timeout = std::chrono::milliseconds(5000);
    return o;
}

std::string fetched(const std::string& url, const ImageFetchOptions& o = local()) {
    const auto bytes = fetch_image_url(url, o, "messages[0].content[1]", "messages[0].content[1].image_url.url");
    return std::string(bytes.begin(), bytes.end());
}

void expect_refused(const std::string& url, const std::string& words, const ImageFetchOptions& o = local()) {
    try {
        fetched(url, o);
        ADD_FAILURE() << "fetched " << url;
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "messages[0].content[1].image_url.url");
        const std::string what = e.what();
        EXPECT_NE(what.find("'messages[0].content[1]': the image URL " + url + " could not be fetched: " + words),
                  std::string::npos)
            << what;
    }
}

TEST(ImageFetch, ReturnsTheImageAndFollowsRedirectsUpToThree) {
    TestServer server;
    EXPECT_EQ(fetched(server.url("/img.png")), kPng);
    EXPECT_EQ(fetched(server.url("/typed.png")), kPng) << "the media type is matched without case or parameters";
    EXPECT_EQ(fetched(server.url("/r/0")), kPng);
    EXPECT_EQ(fetched(server.url("/r/2")), kPng) << "three redirects";
    expect_refused(server.url("/r/3"), "more than 3 redirects");
}

TEST(ImageFetch, RefusesWhatIsNotAnImageOrTooLargeOrLate) {
    TestServer server;
    expect_refused(server.url("/page"), "the content type is 'text/html', not an image");
    expect_refused(server.url("/missing"), "HTTP 404");
    expect_refused(server.url("/big"), "the image is over the limit of 1048576 bytes");
    ImageFetchOptions quick = local();
    quick.timeout = std::chrono::milliseconds(300);
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused(server.url("/slow"), "no answer within 300 ms", quick);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1200)) << "the fetch gave up at its timeout";
    expect_refused("http://127.0.0.1:1/img.png", "");  // nothing listens: the connection's error
}

TEST(ImageFetch, LoopbackAndPrivateHostsNeedAllowPrivate) {
    TestServer server;
    ImageFetchOptions strict = local();
    strict.allow_private = false;
    expect_refused(server.url("/img.png"), "'127.0.0.1' resolves to a private, loopback or reserved address (127.0.0.1)",
                   strict);
    expect_refused("http://localhost:9/img.png", "'localhost' resolves to a private, loopback or reserved address", strict);
    expect_refused("http://169.254.169.254/latest/meta-data", "'169.254.169.254' resolves to a private", strict);
    expect_refused("http://[::1]:9/x", "'::1' resolves to a private", strict);
}

}  // namespace
}  // namespace pagoda::server
