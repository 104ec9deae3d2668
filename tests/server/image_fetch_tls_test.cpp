// fetch_image_url over HTTPS against a local TLS server whose self-signed certificate is made here
// (OpenSSL, P-256): trusted through SSL_CERT_FILE (which the fetcher's default verify paths read, as
// curl and Python do), the image arrives, by IP and by host name, and a redirect stays on TLS; an
// untrusted certificate and one for another host name are refused as a 400 naming the TLS failure,
// never fetched.
#include <atomic>
#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "env_guard.h"
#include "server/api_error.h"
#include "server/image_fetch.h"
#include "server/threaded_test_server.h"

namespace pagoda::server {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
namespace fs = std::filesystem;

const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(64, 'q');

// A self-signed P-256 certificate for `names` (a subjectAltName list, e.g. "IP:127.0.0.1"), written
// with its key as PEM files under `dir`.
struct Certificate {
    std::string cert_path, key_path;
};
Certificate make_certificate(const fs::path& dir, const std::string& stem, const std::string& names) {
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
    if (!key || !cert) throw std::runtime_error("openssl: cannot make a key or certificate");
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("pagoda test"), -1, -1, 0);
    X509_set_issuer_name(cert.get(), name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    for (auto [nid, value] : {std::pair{NID_subject_alt_name, names.c_str()}, {NID_basic_constraints, "critical,CA:TRUE"}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
        if (!ext) throw std::runtime_error("openssl: bad extension");
        X509_add_ext(cert.get(), ext, -1);
        X509_EXTENSION_free(ext);
    }
    if (!X509_sign(cert.get(), key.get(), EVP_sha256())) throw std::runtime_error("openssl: cannot sign");
    Certificate out{(dir / (stem + "-cert.pem")).string(), (dir / (stem + "-key.pem")).string()};
    auto write = [](const std::string& path, auto&& emit) {
        std::unique_ptr<FILE, decltype(&fclose)> f(fopen(path.c_str(), "w"), fclose);
        if (!f || !emit(f.get())) throw std::runtime_error("cannot write " + path);
    };
    write(out.cert_path, [&](FILE* f) { return PEM_write_X509(f, cert.get()) == 1; });
    write(out.key_path, [&](FILE* f) {
        return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
    });
    return out;
}

// Answers each TLS connection on a thread of its own: /img.png, /r (a relative redirect to it).
class TlsServer {
public:
    explicit TlsServer(const Certificate& c)
        : tls_(ssl::context::tls_server), server_([this](tcp::socket s) { serve(std::move(s)); }) {
        tls_.use_certificate_chain_file(c.cert_path);
        tls_.use_private_key_file(c.key_path, ssl::context::pem);
    }
    std::string url(const std::string& host, const std::string& path) const {
        return "https://" + host + ":" + std::to_string(server_.port()) + path;
    }

private:
    void serve(tcp::socket socket) {
        ssl::stream<tcp::socket> stream(std::move(socket), tls_);
        boost::system::error_code ec;
        stream.handshake(ssl::stream_base::server, ec);
        if (ec) return;  // the client refused the certificate
        std::string request;
        net::read_until(stream, net::dynamic_buffer(request), "\r\n\r\n", ec);
        if (ec) return;
        const size_t sp = request.find(' ');
        const std::string path = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
        const std::string head = path == "/img.png" ? "200 OK\r\nContent-Type: image/png\r\nContent-Length: " +
                                                          std::to_string(kPng.size())
                                 : path == "/r"     ? std::string("302 Found\r\nLocation: /img.png\r\nContent-Length: 0")
                                                    : std::string("404 Not Found\r\nContent-Length: 0");
        const std::string out = "HTTP/1.1 " + head + "\r\nConnection: close\r\n\r\n" + (path == "/img.png" ? kPng : "");
        net::write(stream, net::buffer(out), ec);
        stream.shutdown(ec);
    }

    ssl::context tls_;
    test::ThreadedTestServer server_;  // last: its threads stop before tls_ goes
};

ImageFetchOptions local() {
    ImageFetchOptions o;
    o.allow = true;
    o.allow_private = true;  // the server is on 127.0.0.1
    o.timeout = std::chrono::milliseconds(5000);
    return o;
}

std::string fetched(const std::string& url) {
    const auto bytes = fetch_image_url(url, local(), "input[0].content[0]", "input[0].content[0].image_url");
    return std::string(bytes.begin(), bytes.end());
}

void expect_tls_refused(const std::string& url) {
    try {
        fetched(url);
        ADD_FAILURE() << "fetched " << url;
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "input[0].content[0].image_url");
        const std::string what = e.what();
        EXPECT_NE(what.find("'input[0].content[0]': the image URL " + url + " could not be fetched: "), std::string::npos)
            << what;
        EXPECT_NE(what.find("certificate verify failed"), std::string::npos) << what;
    }
}

class ImageFetchTls : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("pagoda-fetch-tls-" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(ImageFetchTls, FetchesFromAServerItsCertificateStoreTrusts) {
    const Certificate c = make_certificate(dir_, "good", "IP:127.0.0.1,DNS:localhost");
    TlsServer server(c);
    test::EnvGuard trust("SSL_CERT_FILE", c.cert_path);
    test::EnvGuard no_dir("SSL_CERT_DIR", dir_.string());  // no system CA folder: only this certificate
    EXPECT_EQ(fetched(server.url("127.0.0.1", "/img.png")), kPng) << "the IP address is in the subjectAltName";
    EXPECT_EQ(fetched(server.url("127.0.0.1", "/r")), kPng) << "a relative redirect stays on https";
    EXPECT_EQ(fetched(server.url("localhost", "/img.png")), kPng) << "the host name is in the subjectAltName";
}

TEST_F(ImageFetchTls, RefusesAnUntrustedCertificate) {
    const Certificate c = make_certificate(dir_, "self", "IP:127.0.0.1");
    const Certificate other = make_certificate(dir_, "other", "IP:127.0.0.1");
    TlsServer server(c);
    test::EnvGuard trust("SSL_CERT_FILE", other.cert_path);  // a store that holds another certificate
    test::EnvGuard no_dir("SSL_CERT_DIR", dir_.string());
    expect_tls_refused(server.url("127.0.0.1", "/img.png"));
}

TEST_F(ImageFetchTls, RefusesACertificateForAnotherHost) {
    const Certificate c = make_certificate(dir_, "elsewhere", "DNS:images.example.com");
    TlsServer server(c);
    test::EnvGuard trust("SSL_CERT_FILE", c.cert_path);  // trusted, but not for 127.0.0.1
    test::EnvGuard no_dir("SSL_CERT_DIR", dir_.string());
    expect_tls_refused(server.url("127.0.0.1", "/img.png"));
}

}  // namespace
}  // namespace pagoda::server
