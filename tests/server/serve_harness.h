// Test harness for end-to-end server tests: starts the real `pagoda serve` on a free loopback port
// (--port 0; the port is read from its "listening on" log line), waits for /health, and stops it
// with SIGTERM. RawClient is a minimal blocking HTTP/1.1 client over a socket, so tests can do what
// libraries hide: send bytes slowly, hang up mid-stream, read chunked SSE as it arrives.
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace pagoda::test {

// A model for server tests, generated once per test binary run (tiny or a slower "medium" one).
std::string server_test_model(bool slow = false);
// 24 thin layers (16 M parameters, f32): for tests that need work to outlast a deadline on every host.
// Run with PAGODA_ISA=scalar (and the harness's one thread) it decodes ~280 tokens/s and prefills
// 2000 tokens in one ~14 s step on the AMX Xeon, yet no op of that step takes more than ~0.4 s: a
// step cut off at shutdown stops soon.
std::string server_deep_test_model();
// The tiny model with fill-in-the-middle tokens (gen-model --fim-tokens): ids 506..511 are
// <|fim_prefix|> <|fim_suffix|> <|fim_middle|> <|fim_pad|> <|repo_name|> <|file_sep|>.
std::string server_fim_test_model();
// A tiny random bert encoder (gen-model --arch bert, mean pooling, 256 positions) with the GPT-2
// vocabulary fixture copied in (--vocab), so it loads before a WordPiece tokenizer exists.
// A random bert with gen-model's own WordPiece vocabulary (512 tokens; any ASCII text encodes).
std::string server_bert_wordpiece_test_model();
std::string server_bert_test_model();
std::string server_jina_test_model();  // jina-bert-v2 (ALiBi, GEGLU), a WordPiece vocabulary, mean pooling

class ServeProcess {
public:
    // Starts `pagoda serve -m MODEL --port 0 --chat-template chatml <extra>` (no chatml where extra
    // names a --chat-template); waits until ready.
    explicit ServeProcess(const std::vector<std::string>& extra, const std::string& model = server_test_model(),
                          bool wait_ready = true);
    ~ServeProcess();  // SIGTERM (then SIGKILL after 15 s)
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    // Sends SIGTERM and waits up to `timeout_s` for the exit status (-1 on timeout).
    int terminate(double timeout_s = 15);
    // Waits up to `timeout_s` for the process to exit on its own; its status, or -1 on timeout.
    int wait_exit(double timeout_s);
    std::string log() const;  // everything the server wrote to stderr so far

private:
    pid_t pid_ = -1;
    int port_ = 0;
    std::string log_path_;
    bool exited_ = false;
};

struct HttpResult {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;                            // de-chunked
};

class RawClient {
public:
    explicit RawClient(int port);
    ~RawClient();
    void send(const std::string& bytes);  // false-free: throws on failure
    // Reads what arrives within `timeout_ms`; empty string on timeout; sets eof() on close.
    std::string read_some(int timeout_ms);
    // Reads until the peer closes (or timeout); returns everything.
    std::string read_all(int timeout_ms);
    bool eof() const { return eof_; }
    void shutdown_write();  // half-close: no more bytes from us, still reading
    void close();

private:
    int fd_ = -1;
    bool eof_ = false;
};

// One request on a fresh connection (Connection: close), response de-chunked.
HttpResult http_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                        const std::vector<std::string>& headers = {}, int timeout_ms = 30000);
HttpResult parse_http_response(const std::string& raw);
// The value of an unlabelled (or exactly labelled) sample in Prometheus text; NaN when absent.
// The model_name label every series carries is ignored unless `series` names it.
std::string without_model_name(std::string line);
double metric_value(const std::string& metrics_text, const std::string& series);
// Polls /metrics until `pred` holds (or 10 s pass); returns the last text. The engine publishes its
// counters after a step returns, so an answer can reach a client before the step shows there.
template <class Pred>
std::string wait_metrics(int port, Pred pred) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        text = http_request(port, "GET", "/metrics").body;
        if (pred(text)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return text;
}

}  // namespace pagoda::test
