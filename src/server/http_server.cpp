#include "server/http_server.h"

#include <atomic>
#include <csignal>
#include <functional>
#include <thread>

#include "core/log.h"
#include "server/http_common.h"
#include "server/listener.h"
#include "server/tls_context.h"

namespace pagoda::server {

using namespace transport;

int run_http_server(ModelRouter& router, const HttpServerOptions& options) {
    ServerShared shared{router, options};
    // Flags that fail here fail before the port is taken: a bad origin, a bad certificate or key.
    shared.cors = CorsPolicy(options.cors_origins);
    if (!options.ssl_cert.empty() || !options.ssl_key.empty()) shared.tls = make_tls_context(options.ssl_cert, options.ssl_key);
    net::io_context ioc(options.io_threads);
    tcp::acceptor acceptor = listen_on(ioc, options.host, options.port);
    const auto bound = acceptor.local_endpoint();
    log_info("serve: listening on {}:{}{}", bound.address().to_string(), bound.port(), shared.tls ? " (HTTPS)" : "");
    start_accepting(ioc, acceptor, shared);

    int exit_code = 0;
    std::atomic<bool> shutting_down{false};
    net::steady_timer drain_timer(ioc);
    Clock::time_point drain_start;
    bool engine_stopped = false, websockets_told = false;
    Clock::time_point websockets_deadline;
    // Polls until the requests in flight are done (or the shutdown timeout ran out and they were
    // cut off), then stops listening and, after one more poll finds nothing in flight (a
    // connection accepted just before the listener closed sends its request), stops the I/O
    // threads. The listener stays open until then so probes and late clients get a clear 503
    // instead of a refused connection.
    bool listener_closed = false;
    std::function<void()> poll_drain = [&] {
        drain_timer.expires_after(std::chrono::milliseconds(50));
        drain_timer.async_wait([&](beast::error_code) {
            const double waited = std::chrono::duration<double>(Clock::now() - drain_start).count();
            const bool idle = router.active_jobs() == 0 && shared.writes_in_progress == 0 && shared.reads_in_progress == 0;
            if (idle && !websockets_told) {
                // WebSockets get a Close frame rather than a vanished connection; wait for their
                // close handshakes a moment.
                websockets_told = true;
                websockets_deadline = Clock::now() + std::chrono::seconds(1);
                shared.close_websockets();
            }
            const bool websockets_done = shared.open_websockets == 0 || Clock::now() > websockets_deadline;
            const bool overdue = waited > options.shutdown_timeout + 5;
            if ((idle && websockets_done) || overdue) {
                if (listener_closed || overdue) {
                    ioc.stop();
                    return;
                }
                beast::error_code ec;
                acceptor.close(ec);
                listener_closed = true;
            }
            if (!engine_stopped && waited >= options.shutdown_timeout) {
                log_info("serve: shutdown timeout over: ending {} requests with an error", router.active_jobs());
                engine_stopped = true;
                router.cut_off_remaining();  // their final deltas still reach the clients, as errors
            }
            poll_drain();
        });
    };
    auto begin_shutdown = [&](const char* why) {
        if (shutting_down.exchange(true)) return;
        log_info("serve: {}: draining (not ready, no new requests); waiting up to {} s for {} requests", why,
                 options.shutdown_timeout, router.active_jobs());
        router.begin_drain();
        shared.begin_drain();
        drain_start = Clock::now();
        poll_drain();
    };
    // The lame duck: not ready, still serving, until the grace is over or another signal comes.
    net::steady_timer grace_timer(ioc);
    bool lame_duck = false;
    net::signal_set signals(ioc, SIGINT, SIGTERM);
    std::function<void()> wait_for_signal = [&] {
        signals.async_wait([&](beast::error_code ec, int sig) {
            if (ec) return;
            const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
            if (lame_duck || options.drain_grace <= 0 || shutting_down) {
                grace_timer.cancel();
                begin_shutdown(name);
                return;
            }
            lame_duck = true;
            log_info("serve: {}: not ready; still serving new requests for {} s (the drain grace; another signal ends it)",
                     name, options.drain_grace);
            router.begin_lame_duck();
            shared.begin_drain();  // no keep-alive: each answer closes its connection
            grace_timer.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.drain_grace)));
            grace_timer.async_wait([&, name](beast::error_code) { begin_shutdown(name); });
            wait_for_signal();
        });
    };
    wait_for_signal();
    // SIGHUP, with several models: reload each from its path beside the running version (a server
    // of one model keeps the default action, as before).
    net::signal_set hangup(ioc);
    std::function<void()> wait_for_hangup = [&] {
        hangup.async_wait([&](beast::error_code ec, int) {
            if (ec) return;
            router.reload_all();
            wait_for_hangup();
        });
    };
    if (router.multi()) {
        hangup.add(SIGHUP);
        wait_for_hangup();
    }

    std::thread loader([&] {
        try {
            router.load();
        } catch (const std::exception& e) {
            log_error("serve: cannot load the model: {}", e.what());
            net::post(ioc, [&] {
                exit_code = 1;
                begin_shutdown("model load failed");
            });
        }
    });

    std::vector<std::thread> threads;
    for (int i = 1; i < options.io_threads; ++i) threads.emplace_back([&] { ioc.run(); });
    ioc.run();
    for (auto& t : threads) t.join();
    loader.join();
    router.stop_engine();
    log_info("serve: stopped");
    return exit_code;
}

}  // namespace pagoda::server
