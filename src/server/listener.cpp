#include "server/listener.h"

#include "core/error.h"
#include "core/log.h"
#include "server/http_session.h"

namespace pagoda::server::transport {
namespace {

class Listener : public std::enable_shared_from_this<Listener> {
public:
    Listener(net::io_context& ioc, tcp::acceptor& acceptor, ServerShared& shared)
        : ioc_(ioc), acceptor_(acceptor), shared_(shared) {}
    void accept() {
        acceptor_.async_accept(net::make_strand(ioc_), beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
    }

private:
    void on_accept(beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // shutting down
        if (!ec) {
            socket.set_option(tcp::no_delay(true), ec);  // token streams are many small writes
            start_http_session(std::move(socket), shared_);
        } else {
            log_warn("accept failed: {}", ec.message());
        }
        accept();
    }
    net::io_context& ioc_;
    tcp::acceptor& acceptor_;
    ServerShared& shared_;
};

// An IP address as given, else the host name's first IPv4 address, else its first IPv6 one (IPv4
// first so that "localhost" answers clients of 127.0.0.1, whichever order the resolver prefers).
net::ip::address resolve_host(net::io_context& ioc, const std::string& host) {
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (!ec) return address;
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(host, "", tcp::resolver::passive, ec);
    if (ec || results.empty()) fail("--host '{}' is neither an IP address nor a host name that resolves: {}", host, ec.message());
    for (const auto& entry : results)
        if (entry.endpoint().address().is_v4()) return entry.endpoint().address();
    return results.begin()->endpoint().address();
}

}  // namespace

tcp::acceptor listen_on(net::io_context& ioc, const std::string& host, uint16_t port) {
    tcp::acceptor acceptor(ioc);
    tcp::endpoint endpoint(resolve_host(ioc, host), port);
    beast::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) fail("cannot listen on {}:{}: {}", host, port, ec.message());
    return acceptor;
}

void start_accepting(net::io_context& ioc, tcp::acceptor& acceptor, ServerShared& shared) {
    std::make_shared<Listener>(ioc, acceptor, shared)->accept();
}

}  // namespace pagoda::server::transport
