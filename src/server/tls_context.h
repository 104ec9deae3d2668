// The TLS side of `serve --ssl-cert/--ssl-key`: an OpenSSL server context (TLS 1.2 and later) with
// the PEM certificate chain and private key loaded and checked against each other.
#pragma once
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace pagoda::server {

// Throws pagoda::Error naming the flag and file when a file is missing, unreadable, not PEM, or the
// key does not belong to the certificate; or when only one of the two is given.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const std::string& cert_file, const std::string& key_file);

}  // namespace pagoda::server
