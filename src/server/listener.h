// The listening socket of `pagoda serve` and its accept loop: every accepted connection gets its
// own strand and an HTTP session.
#pragma once
#include <cstdint>
#include <string>

#include "server/http_common.h"

namespace pagoda::server::transport {

// Binds and listens on host:port (port 0: any free port); a host name binds its first IPv4 address,
// else its first IPv6 one. Throws pagoda::Error naming the address and the reason when it cannot.
tcp::acceptor listen_on(net::io_context& ioc, const std::string& host, uint16_t port);
// Accepts connections until `acceptor` is closed (shutdown); both must outlive the io_context's run.
void start_accepting(net::io_context& ioc, tcp::acceptor& acceptor, ServerShared& shared);

}  // namespace pagoda::server::transport
