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

}  // namespace

tcp::acceptor listen_on(net::io_context& ioc, const std::string& host, uint16_t port) {
    tcp::acceptor acceptor(ioc);
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) fail("--host '{}' is not an IP address", host);
    tcp::endpoint endpoint(address, port);
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
