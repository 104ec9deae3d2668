// A loopback TCP server for client tests: accepts on 127.0.0.1 (an ephemeral port) and hands each
// connection to `serve` on a thread of its own; the destructor stops accepting and joins them all.
#pragma once
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

namespace pagoda::test {

class ThreadedTestServer {
public:
    using Socket = boost::asio::ip::tcp::socket;
    explicit ThreadedTestServer(std::function<void(Socket)> serve)
        : serve_(std::move(serve)), acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { accept_loop(); });
    }
    ~ThreadedTestServer() {
        stop_ = true;
        boost::system::error_code ec;
        Socket wake(io_);
        wake.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
        std::lock_guard lock(mutex_);
        for (auto& t : connections_) t.join();
    }
    ThreadedTestServer(const ThreadedTestServer&) = delete;
    ThreadedTestServer& operator=(const ThreadedTestServer&) = delete;
    uint16_t port() const { return port_; }

private:
    void accept_loop() {
        while (true) {
            Socket socket(io_);
            boost::system::error_code ec;
            acceptor_.accept(socket, ec);
            if (stop_ || ec) return;
            std::lock_guard lock(mutex_);
            connections_.emplace_back([this, s = std::move(socket)]() mutable { serve_(std::move(s)); });
        }
    }

    std::function<void(Socket)> serve_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mutex_;
    std::vector<std::thread> connections_;
};

}  // namespace pagoda::test
