#include "server/serve_harness.h"

#include <algorithm>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <regex>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {

using Clock = std::chrono::steady_clock;

namespace {

// `gen-model --preset tiny` with `shape` flags into the per-process temp folder, once.
std::string generated_model(const std::string& name, const std::vector<std::string>& shape) {
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    const std::string path = temp_path(name);
    if (!std::filesystem::exists(path)) {
        std::vector<std::string> args = {"gen-model", "--preset", "tiny", "-o", path, "--seed", "7"};
        args.insert(args.end(), shape.begin(), shape.end());
        auto r = run_pagoda(args);
        if (r.exit_code != 0) throw std::runtime_error("gen-model failed: " + r.err);
    }
    return path;
}

}  // namespace

std::string server_test_model(bool slow) {
    if (!slow) return generated_model("serve-tiny.gguf", {});
    // ~10 M parameters: a few ms per token, so a long generation lasts seconds
    return generated_model("serve-slow.gguf", {"--layers", "4", "--dim", "512", "--heads", "8", "--kv-heads", "8",
                                                "--ffn", "1024", "--ctx", "8192"});
}

std::string server_fim_test_model() { return generated_model("serve-fim.gguf", {"--fim-tokens"}); }

std::string server_bert_test_model() {
    return generated_model("serve-bert.gguf", {"--arch", "bert", "--ctx", "256", "--vocab", fixture("vocab/ggml-vocab-gpt-2.gguf")});
}

std::string server_bert_wordpiece_test_model() {
    return generated_model("serve-bert-wordpiece.gguf", {"--arch", "bert", "--ctx", "256", "--vocab-size", "512"});
}

std::string server_jina_test_model() {
    return generated_model("serve-jina.gguf", {"--arch", "jina-bert-v2", "--ctx", "256", "--vocab-size", "512"});
}

std::string server_deep_test_model() {
    return generated_model("serve-deep.gguf", {"--layers", "24", "--dim", "256", "--heads", "4", "--kv-heads", "4",
                                                "--ffn", "512", "--ctx", "8192"});
}

ServeProcess::ServeProcess(const std::vector<std::string>& extra, const std::string& model, bool wait_ready) {
    static int counter = 0;
    log_path_ = temp_path("serve-" + std::to_string(++counter) + ".log");
    std::vector<std::string> args = {pagoda_binary(), "serve", "-m", model, "--port", "0", "-t", "1", "--io-threads", "2"};
    // chatml unless the test names its own template.
    if (std::find(extra.begin(), extra.end(), "--chat-template") == extra.end()) args.insert(args.end(), {"--chat-template", "chatml"});
    // No lame-duck grace unless a test asks for one: a stop is then as quick as before it existed.
    if (std::find(extra.begin(), extra.end(), "--drain-grace") == extra.end()) args.insert(args.end(), {"--drain-grace", "0"});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;  // built before fork: the child only calls async-signal-safe functions
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const char* log_path = log_path_.c_str();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        int fd = ::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        int devnull = ::open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        execv(argv[0], argv.data());
        _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    static const std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
    while (Clock::now() < deadline) {
        std::smatch m;
        const std::string text = log();
        if (std::regex_search(text, m, listening)) {
            port_ = std::stoi(m[1]);
            break;
        }
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            exited_ = true;
            throw std::runtime_error("pagoda serve exited at start: " + text);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!port_) throw std::runtime_error("pagoda serve did not start listening: " + log());
    while (wait_ready && Clock::now() < deadline) {
        if (http_request(port_, "GET", "/health", "", {}, 2000).status == 200) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (wait_ready) throw std::runtime_error("pagoda serve did not become ready: " + log());
}

ServeProcess::~ServeProcess() {
    if (!exited_ && pid_ > 0 && terminate(15) == -1) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
}

int ServeProcess::terminate(double timeout_s) {
    if (exited_) return -1;
    kill(pid_, SIGTERM);
    return wait_exit(timeout_s);
}

int ServeProcess::wait_exit(double timeout_s) {
    if (exited_) return -1;
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    while (Clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            exited_ = true;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
}

std::string ServeProcess::log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

RawClient::RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        throw std::runtime_error(std::string("connect failed: ") + strerror(errno));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawClient::~RawClient() { close(); }

void RawClient::shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void RawClient::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void RawClient::send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error(std::string("send failed: ") + strerror(errno));
        off += size_t(n);
    }
}

std::string RawClient::read_some(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return {};
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
        eof_ = true;
        return {};
    }
    return std::string(buf, size_t(n));
}

std::string RawClient::read_all(int timeout_ms) {
    std::string out;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_ && Clock::now() < deadline) {
        int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
        out += read_some(std::max(1, left));
    }
    return out;
}

HttpResult parse_http_response(const std::string& raw) {
    HttpResult r;
    size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) return r;
    std::istringstream head(raw.substr(0, head_end));
    std::string line;
    std::getline(head, line);
    if (line.size() >= 12) r.status = std::stoi(line.substr(9, 3));
    while (std::getline(head, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
    }
    std::string body = raw.substr(head_end + 4);
    if (r.headers["transfer-encoding"] == "chunked") {
        std::string out;
        size_t pos = 0;
        while (pos < body.size()) {
            size_t eol = body.find("\r\n", pos);
            if (eol == std::string::npos) break;
            size_t len = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
            if (len == 0) break;
            out += body.substr(eol + 2, len);
            pos = eol + 2 + len + 2;
        }
        body = out;
    }
    r.body = body;
    return r;
}

HttpResult http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                        const std::vector<std::string>& headers, int timeout_ms) {
    try {
        RawClient c(port);
        std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
        for (const auto& h : headers) req += h + "\r\n";
        if (!body.empty() || method == "POST")
            req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
        req += "\r\n" + body;
        c.send(req);
        return parse_http_response(c.read_all(timeout_ms));
    } catch (const std::exception&) {
        return {};
    }
}

std::string without_model_name(std::string line) {
    const size_t at = line.find("model_name=\"");
    if (at == std::string::npos || (line[at - 1] != '{' && line[at - 1] != ',')) return line;
    size_t end = line.find('"', at + 12);
    if (end == std::string::npos) return line;
    ++end;
    if (line[end] == ',') ++end;                                        // more labels follow
    else if (line[end] == '}' && line[at - 1] == '{') return line.erase(at - 1, end + 1 - (at - 1));  // the only one
    else if (line[at - 1] == ',') return line.erase(at - 1, end - (at - 1));  // the last one
    return line.erase(at, end - at);
}

double metric_value(const std::string& text, const std::string& series) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (series.find("model_name=") == std::string::npos) line = without_model_name(line);
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return std::nan("");
}

}  // namespace pagoda::test
