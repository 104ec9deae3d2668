// `pagoda chat` end to end: on a pseudo-terminal (forkpty) as a person uses it — the "> " prompt,
// a streamed reply, history carried into the next turn (seen through --verbose: the rendered prompt
// and token counts, with the prefix cache serving the earlier turns), /clear, /exit, Ctrl-D, Ctrl-C
// during a reply, a context overflow reported without ending the session — and with stdin not a
// terminal, as a script uses it.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <vector>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

using namespace std::chrono_literals;

// A `pagoda` child whose stdin, stdout and stderr are a pseudo-terminal.
class PtySession {
public:
    explicit PtySession(const std::vector<std::string>& args) {
        struct winsize ws {};
        ws.ws_row = 50;
        ws.ws_col = 200;
        pid_ = forkpty(&master_, nullptr, nullptr, &ws);
        if (pid_ == 0) {
            std::vector<std::string> copy = args;
            std::string bin = pagoda_binary();
            std::vector<char*> argv{bin.data()};
            for (auto& a : copy) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(bin.c_str(), argv.data());
            _exit(127);
        }
    }
    ~PtySession() {
        if (pid_ > 0 && !exited_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (master_ >= 0) close(master_);
    }
    bool started() const { return pid_ > 0 && master_ >= 0; }

    // Reads until `needle` appears after position `from` of the output (carriage returns removed);
    // returns the position just past it, or npos at the deadline or when the child closes the terminal.
    size_t wait_for(const std::string& needle, size_t from, std::chrono::seconds timeout = 60s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (true) {
            if (size_t at = output_.find(needle, from); at != std::string::npos) return at + needle.size();
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0 || !read_some(int(left.count()))) return std::string::npos;
        }
    }
    // Reads until the output is longer than `size`; false at the deadline.
    bool wait_until_longer(size_t size, std::chrono::seconds timeout = 60s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (output_.size() <= size)
            if (std::chrono::steady_clock::now() >= deadline || !read_some(100)) {
                if (std::chrono::steady_clock::now() >= deadline) return false;
            }
        return true;
    }
    void type(const std::string& text) { ASSERT_EQ(write(master_, text.data(), text.size()), ssize_t(text.size())); }

    // The exit status, reading (and keeping) what is left of the output; -1 on timeout.
    int wait_exit(std::chrono::seconds timeout = 60s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                exited_ = true;
                while (read_some(50)) {}
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            read_some(50);
        }
        return -1;
    }
    const std::string& output() const { return output_; }

private:
    bool read_some(int timeout_ms) {
        pollfd p{master_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        char buf[4096];
        const ssize_t n = read(master_, buf, sizeof buf);
        if (n <= 0) return false;  // EIO once the child has closed its side
        for (ssize_t i = 0; i < n; ++i)
            if (buf[i] != '\r') output_ += buf[i];
        return true;
    }

    pid_t pid_ = -1;
    int master_ = -1;
    bool exited_ = false;
    std::string output_;
};

struct TurnCounts {
    long prompt = -1, cached = -1, reply = -1;
};

// The --verbose line of turn `n`.
TurnCounts turn_counts(const std::string& text, int n) {
    const std::regex line("turn " + std::to_string(n) + R"(: prompt (\d+) tokens \((\d+) cached\), reply (\d+) tokens)");
    std::smatch m;
    TurnCounts c;
    if (std::regex_search(text, m, line)) {
        c.prompt = std::stol(m[1]);
        c.cached = std::stol(m[2]);
        c.reply = std::stol(m[3]);
    }
    return c;
}

std::vector<std::string> chat_args(const std::string& model, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"chat", "-m", model, "--chat-template", "chatml", "--temp", "0", "-n", "16", "-v"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

TEST(Chat, TerminalSessionStreamsKeepsHistoryAndExits) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    // The same first turn off a terminal: its reply is what the terminal must show (greedy sampling).
    const ProcessResult scripted = run_pagoda(chat_args(model), "Tell me a story\n");
    ASSERT_EQ(scripted.exit_code, 0) << scripted.err;
    // The reply's line is closed by a newline unless the reply ends with one itself.
    const std::string reply = scripted.out.substr(0, scripted.out.size() - 1);
    ASSERT_FALSE(reply.empty());

    PtySession s(chat_args(model));
    ASSERT_TRUE(s.started());
    size_t at = s.wait_for("/exit (or Ctrl-D) quits", 0);  // the banner
    ASSERT_NE(at, std::string::npos) << s.output();
    at = s.wait_for("> ", at);
    ASSERT_NE(at, std::string::npos) << s.output();
    s.type("Tell me a story\n");
    size_t stats = s.wait_for("turn 1: prompt", at);
    ASSERT_NE(stats, std::string::npos) << s.output();
    // The reply is on the terminal before its counts, after the turn's rendered prompt.
    const size_t prompt_end = s.output().find("<|im_start|>assistant\n", at);
    ASSERT_NE(prompt_end, std::string::npos) << s.output();
    EXPECT_NE(s.output().substr(prompt_end, stats - prompt_end).find(reply), std::string::npos) << s.output();
    at = s.wait_for("> ", stats);
    ASSERT_NE(at, std::string::npos) << s.output();

    s.type("And then?\n");
    stats = s.wait_for("turn 2: prompt", at);
    ASSERT_NE(stats, std::string::npos) << s.output();
    ASSERT_NE(s.wait_for("> ", stats), std::string::npos) << s.output();
    // Turn 2's prompt holds turn 1, question and answer, in the template's form ...
    const std::string turn2 = s.output().substr(s.output().find("turn 2 prompt:"));
    const size_t first = turn2.find("<|im_start|>user\nTell me a story<|im_end|>\n<|im_start|>assistant\n" + reply);
    ASSERT_NE(first, std::string::npos) << turn2;
    EXPECT_NE(turn2.find("<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n", first + reply.size()),
              std::string::npos)
        << turn2;
    // ... so it is longer than turn 1's prompt and reply together, and the prefix cache served the
    // whole blocks of turn 1's prompt.
    const TurnCounts t1 = turn_counts(s.output(), 1), t2 = turn_counts(s.output(), 2);
    ASSERT_GT(t1.prompt, 0) << s.output();
    EXPECT_EQ(t1.cached, 0);
    EXPECT_EQ(t1.reply, 16);
    EXPECT_GT(t2.prompt, t1.prompt + t1.reply);
    EXPECT_GE(t2.cached, t1.prompt / 16 * 16);
    EXPECT_LT(t2.cached, t2.prompt);

    // /clear: the next prompt is a first turn again.
    s.type("/clear\n");
    at = s.wait_for("history cleared", stats);
    ASSERT_NE(at, std::string::npos) << s.output();
    s.type("Tell me a story\n");
    ASSERT_NE(s.wait_for("turn 3: prompt", at), std::string::npos) << s.output();
    EXPECT_EQ(turn_counts(s.output(), 3).prompt, t1.prompt);

    s.type("/exit\n");
    EXPECT_EQ(s.wait_exit(), 0) << s.output();
}

TEST(Chat, TerminalEndOfInputAndContextOverflow) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    // 80 tokens hold the first turn (prompt 49 tokens and reply 16), not the second: the session
    // reports it and goes on; Ctrl-D at the prompt ends it with status 0.
    PtySession s(chat_args(model, {"-c", "80"}));
    ASSERT_TRUE(s.started());
    size_t at = s.wait_for("> ", 0);
    ASSERT_NE(at, std::string::npos) << s.output();
    s.type("Tell me a story\n");
    at = s.wait_for("turn 1: prompt", at);
    ASSERT_NE(at, std::string::npos) << s.output();
    at = s.wait_for("> ", at);
    s.type("And then?\n");
    at = s.wait_for("more than the context of 80", at);
    ASSERT_NE(at, std::string::npos) << s.output();
    at = s.wait_for("> ", at);
    ASSERT_NE(at, std::string::npos) << s.output();
    EXPECT_EQ(s.output().find("turn 2: prompt"), std::string::npos);
    s.type("\x04");  // Ctrl-D on an empty line: end of input
    EXPECT_EQ(s.wait_exit(), 0) << s.output();
}

TEST(Chat, CtrlCStopsTheReplyNotTheSession) {
    // A reply that would run for seconds: until the context (8192 tokens) is full.
    const std::string model = temp_path("chat-slow.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "512", "--heads", "8", "--kv-heads", "4", "--ffn", "1536",
                          "--layers", "4", "--ctx", "8192", "--type", "f16", "-o", model})
                  .exit_code,
              0);
    PtySession s({"chat", "-m", model, "--chat-template", "chatml", "--temp", "0", "-v"});
    ASSERT_TRUE(s.started());
    size_t at = s.wait_for("> ", 0);
    ASSERT_NE(at, std::string::npos) << s.output();
    s.type("hello\n");
    at = s.wait_for("<|im_start|>assistant\n", at);  // the rendered prompt; the reply follows
    ASSERT_NE(at, std::string::npos) << s.output();
    // Wait for the first streamed text, then interrupt.
    ASSERT_TRUE(s.wait_until_longer(s.output().size())) << s.output();
    s.type("\x03");
    at = s.wait_for("reply interrupted", at);
    ASSERT_NE(at, std::string::npos) << s.output();
    at = s.wait_for("tokens (cancelled)", at);  // the turn's counts follow
    ASSERT_NE(at, std::string::npos) << s.output();
    const TurnCounts t1 = turn_counts(s.output(), 1);
    EXPECT_GT(t1.reply, 0);
    EXPECT_LT(t1.prompt + t1.reply, 8192);
    ASSERT_NE(s.wait_for("> ", at), std::string::npos) << s.output();
    s.type("/exit\n");
    EXPECT_EQ(s.wait_exit(), 0) << s.output();
}

TEST(Chat, ScriptedTurnsOneLineEach) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    const ProcessResult one = run_pagoda(chat_args(model), "Tell me a story\n");
    const ProcessResult two = run_pagoda(chat_args(model), "Tell me a story\n\nAnd then?\n");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(two.exit_code, 0) << two.err;
    // No prompt or banner on stdout: only the replies, each ending its line; the empty line is no turn.
    EXPECT_EQ(one.out.find("> "), std::string::npos);
    EXPECT_EQ(one.out.back(), '\n');
    EXPECT_EQ(two.out.substr(0, one.out.size()), one.out);
    EXPECT_GT(two.out.size(), one.out.size() + 1);
    EXPECT_EQ(two.out.back(), '\n');
    const TurnCounts t1 = turn_counts(two.err, 1), t2 = turn_counts(two.err, 2);
    EXPECT_GT(t2.prompt, t1.prompt + t1.reply) << two.err;
    EXPECT_EQ(turn_counts(two.err, 3).prompt, -1);
    // /exit ends the script early; what follows is not read.
    const ProcessResult exited = run_pagoda(chat_args(model), "Tell me a story\n/exit\nAnd then?\n");
    ASSERT_EQ(exited.exit_code, 0) << exited.err;
    EXPECT_EQ(exited.out, one.out);
    // A system message (llama.cpp's -sys spelling) opens every prompt, and survives /clear.
    const ProcessResult sys = run_pagoda(chat_args(model, {"-sys", "Be brief."}), "Tell me a story\n/clear\nAnd then?\n");
    ASSERT_EQ(sys.exit_code, 0) << sys.err;
    const std::string opening = "prompt:\n<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n";
    EXPECT_NE(sys.err.find("turn 1 " + opening + "Tell me a story<|im_end|>"), std::string::npos) << sys.err;
    EXPECT_NE(sys.err.find("turn 2 " + opening + "And then?<|im_end|>"), std::string::npos) << sys.err;
    // Without --verbose nothing but the replies and the load lines reach the streams.
    const ProcessResult quiet = run_pagoda({"chat", "-m", model, "--chat-template", "chatml", "--temp", "0", "-n", "16"},
                                           "Tell me a story\n");
    EXPECT_EQ(quiet.out, one.out);
    EXPECT_EQ(quiet.err.find("turn 1"), std::string::npos) << quiet.err;
}

TEST(Chat, ScriptedErrorsEndWithStatusOne) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    // The second turn does not fit 80 tokens: a script stops there, after printing the first reply.
    const ProcessResult r = run_pagoda(chat_args(model, {"-c", "80"}), "Tell me a story\nAnd then?\n");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("pagoda: error: this message makes the conversation"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("more than the context of 80"), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty());
    // A reply cut by the context (49 prompt tokens, room for 7) says so.
    const ProcessResult full = run_pagoda(chat_args(model, {"-c", "56"}), "Tell me a story\n");
    EXPECT_EQ(full.exit_code, 0) << full.err;
    EXPECT_NE(full.err.find("the context of 56 tokens is full"), std::string::npos) << full.err;
    EXPECT_EQ(turn_counts(full.err, 1).reply, 7) << full.err;
    // A bad template fails before the model loads, naming it.
    const ProcessResult bad = run_pagoda({"chat", "-m", model, "--chat-template", "no-such-template"}, "hi\n");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("no-such-template"), std::string::npos) << bad.err;
}

TEST(Chat, ReasoningShownApartOrHidden) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    // deepseek-r1's generation prompt opens <think>, so this model's whole reply is reasoning.
    auto chat = [&](const std::string& mode) {
        return run_pagoda({"chat", "-m", model, "--chat-template", "deepseek-r1", "--temp", "0", "-n", "12", "--reasoning", mode},
                          "hello there\n");
    };
    const ProcessResult raw = chat("raw"), show = chat("show"), hide = chat("hide");
    ASSERT_EQ(raw.exit_code, 0) << raw.err;
    ASSERT_EQ(show.exit_code, 0) << show.err;
    ASSERT_EQ(hide.exit_code, 0) << hide.err;
    ASSERT_GT(raw.out.size(), 1u);
    EXPECT_EQ(show.out, "<think>\n" + raw.out + "</think>\n");
    EXPECT_EQ(hide.out, "\n");
}

}  // namespace
}  // namespace pagoda::test
