// The command line as people coming from llama.cpp and vLLM type it, through the built binary:
// llama.cpp's multi-letter short flags, -c / -n -1 / -f on run, plain-word parse errors that name
// the flag, one meaning of -t 0 and --kv-memory everywhere, defaults in --help, directories where a
// file is expected, bench-serve's defaults and errors, and progress without '\r' off a terminal.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

const std::string& tiny_model() {
    static const std::string path = [] {
        const std::string p = temp_path("cli-tiny.gguf");
        auto r = run_pagoda({"gen-model", "--preset", "tiny", "-o", p, "--ctx", "64"});
        if (r.exit_code != 0) throw std::runtime_error("gen-model failed: " + r.err);
        return p;
    }();
    return path;
}

size_t count_words(const std::string& text) {
    std::istringstream in(text);
    size_t n = 0;
    for (std::string w; in >> w;) ++n;
    return n;
}

// Runs the binary with stderr on a pseudo-terminal (stdout to /dev/null); returns what the
// terminal received.
std::string run_with_terminal_stderr(const std::vector<std::string>& args) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return "no pty";
    const std::string slave_name = ptsname(master);
    const pid_t pid = fork();
    if (pid == 0) {
        const int slave = open(slave_name.c_str(), O_RDWR);
        const int null = open("/dev/null", O_RDWR);
        if (slave < 0 || null < 0 || dup2(slave, STDERR_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0) _exit(127);
        std::vector<std::string> copy = args;
        std::string bin = pagoda_binary();
        std::vector<char*> argv = {bin.data()};
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    std::string seen;
    char buf[4096];
    for (ssize_t n; (n = read(master, buf, sizeof buf)) > 0;) seen.append(buf, size_t(n));  // EIO once the child exits
    waitpid(pid, nullptr, 0);
    close(master);
    return seen;
}

size_t count_lines(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

TEST(CommandLine, LlamaShortFlagsAreAccepted) {
    auto r = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-ngl", "99", "-n", "4", "--temp", "0", "--ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count_words(r.out), 4u) << r.out;
    EXPECT_NE(r.err.find("--n-gpu-layers has no effect"), std::string::npos) << r.err;

    for (std::vector<std::string> fa : {std::vector<std::string>{"-fa"}, {"-fa", "on"}, {"--flash-attn", "auto"}}) {
        std::vector<std::string> args = {"run", "-m", tiny_model(), "-p", "abc", "-n", "2", "--ids"};
        args.insert(args.begin() + 3, fa.begin(), fa.end());
        auto f = run_pagoda(args);
        ASSERT_EQ(f.exit_code, 0) << fa[0] << ": " << f.err;
        EXPECT_NE(f.err.find("--flash-attn has no effect"), std::string::npos) << f.err;
    }
}

// -ngl with --backend vulkan splits the model: the first N layers on the device, the rest on the cpu
// (greedy tokens as the all-cpu run's, no note); so does a mixture-of-experts model, its MoE layers on
// either side.
TEST(CommandLine, GpuLayersSplitTheModelOnVulkan) {
    PAGODA_REQUIRE_VULKAN();
    auto cpu = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-n", "6", "--temp", "0", "--ignore-eos", "--ids"});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    for (const char* ngl : {"1", "99"}) {
        auto r = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "--backend", "vulkan", "-ngl", ngl, "-n", "6",
                             "--temp", "0", "--ignore-eos", "--ids"});
        ASSERT_EQ(r.exit_code, 0) << ngl << ": " << r.err;
        EXPECT_EQ(r.out, cpu.out) << "-ngl " << ngl;
        EXPECT_EQ(r.err.find("has no effect"), std::string::npos) << r.err;
    }
    const std::string moe = temp_path("cli-ngl-moe.gguf");
    auto g = run_pagoda({"gen-model", "--preset", "tiny", "--arch", "qwen2moe", "--experts", "4", "-o", moe, "--ctx", "64"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    auto moe_cpu = run_pagoda({"run", "-m", moe, "-p", "abc", "-n", "4", "--temp", "0", "--ignore-eos", "--ids"});
    ASSERT_EQ(moe_cpu.exit_code, 0) << moe_cpu.err;
    for (const char* ngl : {"0", "1", "99"}) {
        auto r = run_pagoda({"run", "-m", moe, "-p", "abc", "--backend", "vulkan", "-ngl", ngl, "-n", "4", "--temp", "0",
                             "--ignore-eos", "--ids"});
        ASSERT_EQ(r.exit_code, 0) << "mixture of experts, -ngl " << ngl << ": " << r.err;
        EXPECT_EQ(r.out, moe_cpu.out) << "mixture of experts, -ngl " << ngl;
    }
}

TEST(CommandLine, RunContextAndUntilTheEnd) {
    // -n -1 with -c C generates until the context is full: C - prompt + 1 tokens (the last one is
    // printed, not stored), so a context 4 larger gives exactly 4 more.
    auto run_ctx = [](const char* ctx) {
        return run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-n", "-1", "-c", ctx, "--temp", "0", "--ignore-eos", "--ids"});
    };
    auto small = run_ctx("12"), large = run_ctx("16");
    ASSERT_EQ(small.exit_code, 0) << small.err;
    ASSERT_EQ(large.exit_code, 0) << large.err;
    EXPECT_EQ(count_words(large.out), count_words(small.out) + 4) << small.out << " | " << large.out;
    EXPECT_EQ(large.out.rfind(small.out.substr(0, small.out.size() - 1), 0), 0u) << "greedy: the same start";

    // Asking for more than fits stops at the context and says so.
    auto capped = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-n", "100", "-c", "12", "--temp", "0", "--ignore-eos", "--ids"});
    ASSERT_EQ(capped.exit_code, 0) << capped.err;
    EXPECT_EQ(capped.out, small.out);
    EXPECT_NE(capped.err.find("the context of 12 tokens is full"), std::string::npos) << capped.err;

    auto too_long = run_pagoda({"run", "-m", tiny_model(), "-p", std::string(200, 'x'), "-c", "8"});
    EXPECT_EQ(too_long.exit_code, 1);
    EXPECT_NE(too_long.err.find("-c/--ctx-size"), std::string::npos) << too_long.err;
}

TEST(CommandLine, RunPromptFromAFile) {
    const std::string prompt = temp_path("cli-prompt.txt");
    std::ofstream(prompt) << "Once upon a time";
    auto from_file = run_pagoda({"run", "-m", tiny_model(), "-f", prompt, "-n", "6", "--temp", "0", "--ids"});
    auto inline_prompt = run_pagoda({"run", "-m", tiny_model(), "-p", "Once upon a time", "-n", "6", "--temp", "0", "--ids"});
    ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
    EXPECT_EQ(from_file.out, inline_prompt.out);
    auto both = run_pagoda({"run", "-m", tiny_model(), "-f", prompt, "-p", "x"});
    EXPECT_EQ(both.exit_code, 1);
}

TEST(CommandLine, ParseErrorsNameTheFlagInPlainWords) {
    auto expect_error = [](const std::vector<std::string>& args, const std::string& message) {
        auto r = run_pagoda(args);
        EXPECT_EQ(r.exit_code, 1) << args[0] << " " << message << ": " << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_EQ(count_lines(r.err), 1u) << "one line: " << r.err;
        EXPECT_EQ(r.err.rfind("pagoda: error: ", 0), 0u) << r.err;
    };
    const std::string& m = tiny_model();
    expect_error({"run", "-m", m, "--temp", "abc"}, "--temp: 'abc' is not a number");
    expect_error({"run", "-m", m, "--top-p", "7"}, "--top-p: 7 is out of range: use 0 to 1");
    expect_error({"run", "-m", m, "-n", "12x"}, "--n-predict: '12x' is not a whole number");
    expect_error({"run", "-m", m, "--seed", "abc"}, "--seed: 'abc' is not a valid value");
    expect_error({"gguf-info", m, "-c", "64"}, "unknown option '-c'");
    expect_error({"gguf-info", m, "extra"}, "unexpected argument 'extra'");
    expect_error({"run", "-p", "x"}, "--model is required");
    expect_error({"frobnicate"}, "unknown command 'frobnicate' (pagoda --help lists the options)");
    expect_error({}, "no command given");
    expect_error({"run", "-m", m, "--bogus"}, "pagoda run --help");
}

TEST(CommandLine, ThreadsZeroMeansPhysicalCoresEverywhere) {
    // Each command gets past parsing with -t 0 (and fails on the missing model instead), and
    // refuses -t -1 naming the flag.
    const std::vector<std::vector<std::string>> commands = {
        {"run", "-m", "/nonexistent.gguf"},
        {"serve", "-m", "/nonexistent.gguf"},
        {"bench", "-m", "/nonexistent.gguf"},
        {"perplexity", "-m", "/nonexistent.gguf", "-f", "/nonexistent.txt"},
        {"batch", "-m", "/nonexistent.gguf", "-i", "/nonexistent.jsonl", "-o", "/tmp/out.jsonl"},
        {"bench-throughput", "-m", "/nonexistent.gguf"},
        {"quantize", "/nonexistent.gguf", "/tmp/out.gguf", "q8_0"},
        {"graph", "-m", "/nonexistent.gguf"},
    };
    for (auto args : commands) {
        args.insert(args.end(), {"-t", "0"});
        auto zero = run_pagoda(args);
        EXPECT_EQ(zero.exit_code, 1) << args[0];
        EXPECT_EQ(zero.err.find("threads"), std::string::npos) << args[0] << ": " << zero.err;
        EXPECT_NE(zero.err.find("nonexistent"), std::string::npos) << args[0] << ": " << zero.err;
        args.back() = "-1";
        auto negative = run_pagoda(args);
        EXPECT_EQ(negative.exit_code, 1) << args[0];
        EXPECT_NE(negative.err.find("--threads: -1 is out of range: use 0 to 1024"), std::string::npos)
            << args[0] << ": " << negative.err;
    }
}

TEST(CommandLine, KvMemoryWantsAUnit) {
    auto bare = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-n", "2", "--kv-memory", "1"});
    EXPECT_EQ(bare.exit_code, 1);
    EXPECT_NE(bare.err.find("--kv-memory '1' has no unit"), std::string::npos) << bare.err;
    for (const char* budget : {"1MiB", "0.01", "1%"}) {
        auto r = run_pagoda({"run", "-m", tiny_model(), "-p", "abc", "-n", "2", "--ids", "--kv-memory", budget});
        EXPECT_EQ(r.exit_code, 0) << budget << ": " << r.err;
    }
}

TEST(CommandLine, HelpShowsDefaults) {
    // The line of `flag` in `command --help` shows `shown`.
    auto expect_default = [](const std::string& command, const std::string& flag, const std::string& shown) {
        auto r = run_pagoda({command, "--help"});
        ASSERT_EQ(r.exit_code, 0) << command << ": " << r.err;
        const size_t at = r.out.find(flag);
        ASSERT_NE(at, std::string::npos) << command << " --help lacks " << flag << ":\n" << r.out;
        // CLI11 may wrap a long description: look up to the next option.
        const size_t next = r.out.find("\n  -", at);
        EXPECT_NE(r.out.substr(at, next - at).find(shown), std::string::npos) << command << " " << flag << ":\n" << r.out;
    };
    expect_default("run", "--n-predict", "=128");
    expect_default("run", "--temp", "=0.8");
    expect_default("run", "--top-k", "=40");
    expect_default("serve", "--port", "=8080");
    expect_default("serve", "--host", "=127.0.0.1");
    expect_default("serve", "--max-seqs", "=64");
    expect_default("perplexity", "--ctx", "=256");
    expect_default("bench", "--n-gen", "=128");
    expect_default("bench-serve", "--prompt-len", "=200");
    expect_default("batch", "--max-batched-tokens", "=2048");
    expect_default("quantize", "--calib-tokens", "=8192");
}

TEST(CommandLine, DirectoryWhereAFileIsExpected) {
    const std::string dir = temp_path("cli-dir");
    std::filesystem::create_directories(dir);
    const std::vector<std::vector<std::string>> commands = {
        {"batch", "-m", tiny_model(), "-i", dir, "-o", temp_path("cli-dir-out.jsonl")},
        {"perplexity", "-m", tiny_model(), "-f", dir},
        {"run", "-m", tiny_model(), "-f", dir},
    };
    for (const auto& args : commands) {
        auto r = run_pagoda(args);
        EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
        EXPECT_NE(r.err.find("is a directory"), std::string::npos) << args[0] << ": " << r.err;
    }
}

TEST(CommandLine, BenchServeUnreachableServerInWords) {
    auto r = run_pagoda({"bench-serve", "--url", "http://127.0.0.1:1", "--requests", "1"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("cannot connect to http://127.0.0.1:1"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".hpp"), std::string::npos) << r.err;
    auto conflict = run_pagoda({"bench-serve", "--prompt-len", "16", "--shared-prefix", "20"});
    EXPECT_EQ(conflict.exit_code, 1);
    EXPECT_NE(conflict.err.find("--shared-prefix (20) exceeds --prompt-len (16)"), std::string::npos) << conflict.err;
}

TEST(CommandLine, ProgressOffATerminalIsPlainLines) {
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto ppl = run_pagoda({"perplexity", "-m", tiny_model(), "-f", text, "-c", "16", "--max-windows", "3"});
    ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
    EXPECT_EQ(ppl.err.find('\r'), std::string::npos) << ppl.err;
    EXPECT_NE(ppl.err.find("3/3 windows: running perplexity"), std::string::npos) << ppl.err;

    auto q = run_pagoda({"quantize", tiny_model(), temp_path("cli-q8.gguf"), "q8_0"});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_EQ(q.err.find('\r'), std::string::npos) << q.err;
    // One line per layer (the tiny model has two), and one for each tensor outside the layers.
    EXPECT_NE(q.err.find(" tensors: blk.0 ("), std::string::npos) << q.err;
    EXPECT_NE(q.err.find(" tensors: blk.1 ("), std::string::npos) << q.err;
    EXPECT_NE(q.err.find("21/21 tensors: "), std::string::npos) << q.err;
}

TEST(CommandLine, ReadmeCommandTableMatchesHelp) {
    // Every flag in the first cell of a README command row, and in a usage line of docs/commands.md
    // (`pagoda CMD ...` in a code block), is one `pagoda CMD --help` lists (llama.cpp's -np is
    // listed under its long name --parallel).
    const std::regex row(R"(^\| `([a-z-]+) ([^|]|\\\|)*` \|)"), usage(R"(^pagoda ([a-z-]+) .*$)"),
        flag(R"((^|[ \[|])(--?[a-z][a-z0-9-]*))");
    std::map<std::string, std::string> helps;
    auto check = [&](const std::string& file, const std::regex& line_re) {
        std::ifstream in(source_dir() + "/" + file);
        EXPECT_TRUE(in) << file;
        int lines = 0;
        for (std::string line; std::getline(in, line);) {
            std::smatch m;
            if (!std::regex_search(line, m, line_re)) continue;
            ++lines;
            const std::string command = m[1], cell = m[0];
            if (!helps.count(command)) helps[command] = run_pagoda({command, "--help"}).out;
            const std::string& help = helps[command];
            for (auto it = std::sregex_iterator(cell.begin(), cell.end(), flag); it != std::sregex_iterator(); ++it) {
                std::string name = (*it)[2];
                if (name == "-np") name = "--parallel";
                EXPECT_NE(help.find(name), std::string::npos) << file << ": " << command << " --help lacks " << name;
            }
        }
        return lines;
    };
    EXPECT_GE(check("README.md", row), 10);
    EXPECT_GE(check("docs/commands.md", usage), 14);
}

TEST(CommandLine, ProgressOnATerminalIsABar) {
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    const std::string seen =
        run_with_terminal_stderr({"perplexity", "-m", tiny_model(), "-f", text, "-c", "16", "--max-windows", "3"});
    EXPECT_NE(seen.find("\r["), std::string::npos) << seen;
    EXPECT_NE(seen.find("3/3 windows"), std::string::npos) << seen;
}

TEST(CommandLine, QuantizeSpellingsRequantizeAndTable) {
    const std::string q = temp_path("cli-q4km.gguf");
    auto upper = run_pagoda({"quantize", tiny_model(), q, "Q4_K_M", "--output-tensor-type", "Q8_0"});
    ASSERT_EQ(upper.exit_code, 0) << upper.err;
    EXPECT_NE(upper.out.find("(q4_k_m)"), std::string::npos) << upper.out;
    // The table's columns line up: every row ends its label column at the same place.
    std::istringstream table(upper.out);
    std::vector<std::string> rows;
    for (std::string line; std::getline(table, line);)
        if (line.find(" -> ") != std::string::npos && line.rfind("pagoda", 0) != 0 && line.rfind("total", 0) != 0)
            rows.push_back(line);
    ASSERT_GE(rows.size(), 2u) << upper.out;
    for (const auto& row : rows) EXPECT_EQ(row.size(), rows.front().size()) << upper.out;

    auto again = run_pagoda({"quantize", q, temp_path("cli-q4km-q8.gguf"), "q8_0"});
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_NE(again.err.find("already quantised"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("--allow-requantize"), std::string::npos) << again.err;
    auto allowed = run_pagoda({"quantize", q, temp_path("cli-q4km-q8.gguf"), "q8_0", "--allow-requantize"});
    EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
}

}  // namespace
}  // namespace pagoda::test
