// `pagoda bench-serve`: a bounded load generator for a running OpenAI-compatible server (ours or
// any other). It sends --requests completions with token-id prompts of --prompt-len tokens whose
// first --shared-prefix tokens are common to all (exercising the prefix cache), asks for exactly
// --output-len tokens (ignore_eos), either keeping --concurrency requests in flight or arriving as
// a Poisson process at --rate per second, and reports throughput and latency percentiles: TTFT
// (time to first token), TPOT (time per output token after the first), ITL (gaps between streamed
// chunks) and end-to-end latency. It uses its own Boost.Beast client, one keep-alive connection
// per worker.
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <thread>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/percentile.h"
#include "core/error.h"
#include "server/sse.h"

namespace pagoda::app {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
    std::string url = "http://127.0.0.1:8080";
    int requests = 32, concurrency = 8, prompt_len = 200, output_len = 64;
    int shared_prefix = -1;  // -1: three quarters of prompt_len
    double rate = 0;  // requests per second (Poisson); 0: closed loop at --concurrency
    bool stream = false, json_out = false;
    std::string api_key, model;
    uint64_t seed = 1;
    double timeout = 600;
};

struct Target {
    std::string host, port;
};

Target parse_url(const std::string& url) {
    static const std::regex re(R"(^http://([^/:]+)(?::([0-9]+))?/?$)");
    std::smatch m;
    if (!std::regex_match(url, m, re)) fail("--url must look like http://HOST[:PORT], got '{}'", url);
    return {m[1], m[2].matched ? std::string(m[2]) : "80"};
}

struct Sample {
    bool ok = false;
    std::string error;
    double e2e = 0, ttft = -1;
    std::vector<double> itl;
    int64_t prompt_tokens = 0, completion_tokens = 0;
};

class Connection {
public:
    Connection(net::io_context& ioc, const Target& t, double timeout) : ioc_(ioc), target_(t), timeout_(timeout) {}

    // Sends one request; returns the status and body (streamed bodies are handed to on_data as
    // they arrive instead).
    std::pair<int, std::string> request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& api_key,
                                        const std::function<void(std::string_view)>& on_data = {}) {
        for (int attempt = 0;; ++attempt) {
            try {
                if (!stream_) connect();
                return send(method, path, body, api_key, on_data);
            } catch (const beast::system_error& e) {
                // Start the next connection clean: no half-read bytes of this one.
                stream_.reset();
                buffer_.consume(buffer_.size());
                // A keep-alive connection the server had closed fails at once: retry once on a new one.
                // Otherwise the error in words (Boost's what() names its own source files).
                if (attempt > 0 || !reused_ || got_response_)
                    fail("{} http://{}:{}{}: {}", method, target_.host, target_.port, path, e.code().message());
            }
        }
    }

private:
    void connect() {
        tcp::resolver resolver(ioc_);
        stream_.emplace(ioc_);
        stream_->expires_after(std::chrono::milliseconds(int64_t(timeout_ * 1000)));
        beast::error_code ec;
        const auto endpoints = resolver.resolve(target_.host, target_.port, ec);
        if (!ec) stream_->connect(endpoints, ec);
        if (ec) {
            stream_.reset();
            fail("cannot connect to http://{}:{}: {}", target_.host, target_.port, ec.message());
        }
        stream_->socket().set_option(tcp::no_delay(true));
        reused_ = false;
    }

    std::pair<int, std::string> send(const std::string& method, const std::string& path, const std::string& body,
                                     const std::string& api_key, const std::function<void(std::string_view)>& on_data) {
        http::request<http::string_body> req{http::string_to_verb(method), path, 11};
        req.set(http::field::host, target_.host);
        req.set(http::field::user_agent, "pagoda-bench-serve");
        if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
        if (!body.empty()) {
            req.set(http::field::content_type, "application/json");
            req.body() = body;
        }
        req.prepare_payload();
        stream_->expires_after(std::chrono::milliseconds(int64_t(timeout_ * 1000)));
        http::write(*stream_, req);
        reused_ = true;
        http::response_parser<http::string_body> parser;
        parser.body_limit(std::numeric_limits<uint64_t>::max());
        got_response_ = false;
        http::read_header(*stream_, buffer_, parser);
        got_response_ = true;  // from here on a failure is the server's answer, not a stale connection
        const int status = int(parser.get().result_int());
        const bool chunked = parser.chunked();
        // The parser keeps a reference to the callback: it must live until the body is read.
        auto cb = [&](uint64_t, std::string_view data, beast::error_code&) -> size_t {
            on_data(data);
            return data.size();
        };
        if (on_data && chunked && status == 200) parser.on_chunk_body(cb);
        while (!parser.is_done()) http::read_some(*stream_, buffer_, parser);
        if (!parser.keep_alive()) stream_.reset();
        return {status, parser.get().body()};
    }

    net::io_context& ioc_;
    Target target_;
    double timeout_;
    std::optional<beast::tcp_stream> stream_;
    beast::flat_buffer buffer_;
    bool reused_ = false, got_response_ = false;
};

// The p-th percentile (0..100) by apps/percentile.h's rule; NaN (JSON null) when there are no samples.
double percentile_of(const std::vector<double>& v, double p) {
    return v.empty() ? std::nan("") : app::percentile(v, p / 100.0);
}

double mean(const std::vector<double>& v) {
    if (v.empty()) return std::nan("");
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
}

Sample run_one(Connection& conn, const BenchOptions& o, const std::string& model, const std::vector<int32_t>& prompt) {
    json body = {{"model", model}, {"prompt", prompt}, {"max_tokens", o.output_len}, {"temperature", 0},
                 {"ignore_eos", true}, {"stream", o.stream}};
    if (o.stream) body["stream_options"] = {{"include_usage", true}};
    Sample s;
    const auto t0 = Clock::now();
    auto last = t0;
    server::SseParser sse;
    std::string stream_error;
    auto on_data = [&](std::string_view data) {
        for (const auto& event : sse.feed(data)) {
            if (event == "[DONE]") continue;
            json chunk = json::parse(event, nullptr, false);
            if (chunk.is_discarded()) continue;
            if (chunk.contains("error")) stream_error = chunk["error"].value("message", "stream error");
            if (chunk.contains("usage") && chunk["usage"].is_object()) {
                s.prompt_tokens = chunk["usage"].value("prompt_tokens", 0);
                s.completion_tokens = chunk["usage"].value("completion_tokens", 0);
            }
            bool has_text = false;
            if (chunk.contains("choices"))
                for (const auto& c : chunk["choices"])
                    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) has_text = true;
            if (!has_text) continue;
            const auto now = Clock::now();
            if (s.ttft < 0) s.ttft = std::chrono::duration<double>(now - t0).count();
            else s.itl.push_back(std::chrono::duration<double>(now - last).count());
            last = now;
        }
    };
    try {
        auto [status, text] = conn.request("POST", "/v1/completions", body.dump(), o.api_key,
                                           o.stream ? std::function<void(std::string_view)>(on_data) : nullptr);
        s.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
        if (status != 200) {
            json e = json::parse(text, nullptr, false);
            s.error = fmt::format("HTTP {}: {}", status,
                                  e.is_object() && e.contains("error") ? e["error"].value("message", text) : text.substr(0, 200));
            return s;
        }
        if (!stream_error.empty()) {
            s.error = stream_error;
            return s;
        }
        if (!o.stream) {
            json r = json::parse(text);
            s.prompt_tokens = r["usage"].value("prompt_tokens", 0);
            s.completion_tokens = r["usage"].value("completion_tokens", 0);
            s.ttft = s.e2e;  // nothing arrives before the whole answer
        }
        s.ok = true;
    } catch (const std::exception& e) {
        s.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
        s.error = e.what();
    }
    return s;
}

int bench(BenchOptions o) {
    if (o.shared_prefix < 0) o.shared_prefix = o.prompt_len * 3 / 4;
    if (o.shared_prefix > o.prompt_len) fail("--shared-prefix ({}) exceeds --prompt-len ({})", o.shared_prefix, o.prompt_len);
    const Target target = parse_url(o.url);
    net::io_context ioc;

    // The model's id and vocabulary (for random token prompts) from /v1/models.
    Connection probe(ioc, target, o.timeout);
    auto [status, text] = probe.request("GET", "/v1/models", "", o.api_key);
    if (status != 200) fail("GET {}/v1/models answered {}: {}", o.url, status, text.substr(0, 300));
    json models = json::parse(text, nullptr, false);
    if (!models.is_object() || !models.contains("data") || models["data"].empty())
        fail("GET {}/v1/models returned no model", o.url);
    const std::string model = o.model.empty() ? models["data"][0].value("id", "") : o.model;
    const int64_t vocab = models["data"][0].value("vocab_size", int64_t(32000));

    // Prompts: a shared prefix, then a distinct tail per request. Ids avoid the first few
    // (special) tokens.
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> pick(3, int32_t(std::max<int64_t>(4, vocab - 1)));
    std::vector<int32_t> prefix(size_t(o.shared_prefix));
    for (auto& t : prefix) t = pick(rng);
    std::vector<std::vector<int32_t>> prompts(size_t(o.requests));
    for (auto& p : prompts) {
        p = prefix;
        while (int(p.size()) < o.prompt_len) p.push_back(pick(rng));
    }

    std::vector<Sample> samples(size_t(o.requests));
    std::atomic<int> next{0};
    const auto start = Clock::now();
    if (o.rate <= 0) {
        std::vector<std::thread> workers;
        for (int w = 0; w < std::min(o.concurrency, o.requests); ++w)
            workers.emplace_back([&] {
                net::io_context wio;
                Connection conn(wio, target, o.timeout);
                for (int i; (i = next++) < o.requests;) samples[size_t(i)] = run_one(conn, o, model, prompts[size_t(i)]);
            });
        for (auto& t : workers) t.join();
    } else {
        // Open loop: Poisson arrivals; each request on its own thread and connection, at most
        // --concurrency in flight (later arrivals wait for a slot, as a real client pool would).
        std::exponential_distribution<double> gap(o.rate);
        std::vector<std::thread> threads;
        std::mutex m;
        std::condition_variable cv;
        int in_flight = 0;
        auto when = Clock::now();
        for (int i = 0; i < o.requests; ++i) {
            std::this_thread::sleep_until(when);
            {
                std::unique_lock lock(m);
                cv.wait(lock, [&] { return in_flight < o.concurrency; });
                ++in_flight;
            }
            threads.emplace_back([&, i] {
                net::io_context wio;
                Connection conn(wio, target, o.timeout);
                samples[size_t(i)] = run_one(conn, o, model, prompts[size_t(i)]);
                std::lock_guard lock(m);
                --in_flight;
                cv.notify_all();
            });
            when += std::chrono::microseconds(int64_t(gap(rng) * 1e6));
        }
        for (auto& t : threads) t.join();
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();

    std::vector<double> ttft, tpot, itl, e2e;
    int64_t ok = 0, prompt_tokens = 0, completion_tokens = 0;
    std::string first_error;
    for (const auto& s : samples) {
        if (!s.ok) {
            if (first_error.empty()) first_error = s.error;
            continue;
        }
        ++ok;
        prompt_tokens += s.prompt_tokens;
        completion_tokens += s.completion_tokens;
        e2e.push_back(s.e2e);
        if (s.ttft >= 0) ttft.push_back(s.ttft);
        if (o.stream && s.completion_tokens > 1 && s.ttft >= 0) tpot.push_back((s.e2e - s.ttft) / double(s.completion_tokens - 1));
        itl.insert(itl.end(), s.itl.begin(), s.itl.end());
    }
    const int64_t errors = o.requests - ok;
    if (o.json_out) {
        auto stats = [](const std::vector<double>& v) {
            return json{{"mean", mean(v)}, {"p50", percentile_of(v, 50)}, {"p90", percentile_of(v, 90)}, {"p99", percentile_of(v, 99)}};
        };
        json out = {{"requests", o.requests}, {"ok", ok}, {"errors", errors}, {"wall_s", wall},
                    {"request_throughput", double(ok) / wall}, {"output_token_throughput", double(completion_tokens) / wall},
                    {"total_token_throughput", double(prompt_tokens + completion_tokens) / wall},
                    {"ttft_s", stats(ttft)}, {"tpot_s", stats(tpot)}, {"itl_s", stats(itl)}, {"e2e_s", stats(e2e)}};
        if (!first_error.empty()) out["first_error"] = first_error;
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("pagoda bench-serve: %s model %s | %d requests, %s, prompt %d (shared %d), output %d, %s\n",
                    o.url.c_str(), model.c_str(), o.requests,
                    o.rate > 0 ? fmt::format("rate {}/s (cap {})", o.rate, o.concurrency).c_str()
                               : fmt::format("concurrency {}", o.concurrency).c_str(),
                    o.prompt_len, o.shared_prefix, o.output_len, o.stream ? "streaming" : "not streaming");
        std::printf("  ok %lld, errors %lld, wall %.2f s\n", (long long)ok, (long long)errors, wall);
        std::printf("  throughput: %.2f requests/s, %.1f output tokens/s, %.1f total tokens/s\n", double(ok) / wall,
                    double(completion_tokens) / wall, double(prompt_tokens + completion_tokens) / wall);
        std::printf("  %-6s %10s %10s %10s %10s  (ms)\n", "", "mean", "p50", "p90", "p99");
        auto row = [](const char* name, const std::vector<double>& v) {
            std::printf("  %-6s %10.2f %10.2f %10.2f %10.2f\n", name, mean(v) * 1e3, percentile_of(v, 50) * 1e3,
                        percentile_of(v, 90) * 1e3, percentile_of(v, 99) * 1e3);
        };
        row("TTFT", ttft);
        if (o.stream) {  // without streaming only the end-to-end time is observable
            row("TPOT", tpot);
            row("ITL", itl);
        }
        row("E2E", e2e);
        if (!first_error.empty()) std::printf("  first error: %s\n", first_error.c_str());
    }
    return errors == 0 ? 0 : 1;
}

CommandRegistration reg("bench-serve", "Load-test a running OpenAI-compatible server (TTFT, TPOT, ITL, throughput)",
                        [](CLI::App& sub) {
    auto o = std::make_shared<BenchOptions>();
    sub.add_option("--url", o->url, "Server base URL, http://HOST:PORT");
    sub.add_option("--requests", o->requests, "Requests to send")->check(in_range(1, 100000));
    sub.add_option("--concurrency", o->concurrency, "Requests in flight (with --rate: the cap)")->check(in_range(1, 1024));
    sub.add_option("--rate", o->rate, "Poisson arrival rate, requests per second (0: closed loop at --concurrency)")
        ->check(in_range(0.0, 1e6));
    sub.add_option("--prompt-len", o->prompt_len, "Prompt tokens")->check(in_range(1, 1 << 20));
    sub.add_option("--shared-prefix", o->shared_prefix,
                   "Leading prompt tokens shared by all requests (-1: three quarters of --prompt-len)")
        ->check(in_range(-1, 1 << 20));
    sub.add_option("--output-len", o->output_len, "Tokens generated per request")->check(in_range(1, 1 << 20));
    sub.add_flag("--stream", o->stream, "Stream responses (SSE) and measure TTFT/ITL");
    sub.add_option("--api-key", o->api_key, "Bearer key");
    sub.add_option("--model", o->model, "Model id (default: the first from /v1/models)");
    sub.add_option("--seed", o->seed, "Prompt generator seed");
    sub.add_option("--timeout", o->timeout, "Seconds before one request is abandoned")->check(in_range(0.1, 86400.0));
    sub.add_flag("--json", o->json_out, "Print the results as JSON");
    return [o] { return bench(*o); };
});

}  // namespace
}  // namespace pagoda::app
