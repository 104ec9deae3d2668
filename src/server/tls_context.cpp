#include "server/tls_context.h"

#include <filesystem>
#include <fstream>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/error.h"

namespace pagoda::server {
namespace {

namespace ssl = boost::asio::ssl;

void check_readable(const std::string& path, const char* flag) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) fail("{} '{}': no such file", flag, path);
    if (!std::ifstream(path)) fail("{} '{}': cannot be read (permissions?)", flag, path);
}

// OpenSSL's reason for the last failure, e.g. "no start line" for a file that is not PEM.
std::string openssl_reason(const boost::system::error_code& ec) {
    const unsigned long e = ERR_peek_last_error();
    const char* reason = e ? ERR_reason_error_string(e) : nullptr;
    ERR_clear_error();
    return reason ? reason : ec.message();
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const std::string& cert_file, const std::string& key_file) {
    if (cert_file.empty() != key_file.empty())
        fail("HTTPS needs both --ssl-cert and --ssl-key (got only {})", cert_file.empty() ? "--ssl-key" : "--ssl-cert");
    check_readable(cert_file, "--ssl-cert");
    check_readable(key_file, "--ssl-key");
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    boost::system::error_code ec;
    ctx->use_certificate_chain_file(cert_file, ec);
    if (ec) fail("--ssl-cert '{}' is not a PEM certificate: {}", cert_file, openssl_reason(ec));
    ctx->use_private_key_file(key_file, ssl::context::pem, ec);
    if (ec) fail("--ssl-key '{}' is not a PEM private key for --ssl-cert: {}", key_file, openssl_reason(ec));
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
        fail("--ssl-key '{}' does not belong to the certificate in --ssl-cert '{}'", key_file, cert_file);
    return ctx;
}

}  // namespace pagoda::server
