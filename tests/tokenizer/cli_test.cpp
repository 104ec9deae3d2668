// `pagoda tokenize --inp` on every test-vector file in ../shared/vocab must print the .out file
// byte for byte; plus the stdin/--detok round trip of the command.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tokenizer/vector_file.h"
#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

std::string run_command(const std::string& command, int* status) {
    std::string output;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return output;
    char buffer[65536];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
    *status = ::pclose(pipe);
    return output;
}

std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

TEST(TokenizeCommand, InpMatchesOutForEveryVocabulary) {
    std::string dir = fixture("vocab");
    PAGODA_REQUIRE_FIXTURE(dir);
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::string path = entry.path().string();
        if (!path.ends_with(".gguf.inp")) continue;
        std::string gguf = path.substr(0, path.size() - 4);
        int status = -1;
        std::string out = run_command(pagoda_binary() + " tokenize -m " + shell_quoted(gguf) + " --inp " + shell_quoted(path), &status);
        EXPECT_EQ(status, 0) << path;
        std::string expected = tokenizer::read_text_file(gguf + ".out");
        EXPECT_TRUE(out == expected) << "pagoda tokenize --inp " << path << " differs from its .out";
        ++checked;
    }
    EXPECT_GE(checked, 5);
}

TEST(TokenizeCommand, StdinEncodeAndDetokenize) {
    std::string model = vocab_path("llama-spm");
    PAGODA_REQUIRE_FIXTURE(model);
    std::string text_file = temp_path("tokenize_input.txt");
    std::ofstream(text_file) << "Hello world";
    int status = -1;
    // " Hello world" with the dummy prefix: 15043 3186; BOS 1 by the vocabulary's default.
    EXPECT_EQ(run_command(pagoda_binary() + " tokenize -m " + shell_quoted(model) + " < " + text_file, &status), "1 15043 3186\n");
    EXPECT_EQ(status, 0);
    EXPECT_EQ(run_command(pagoda_binary() + " tokenize --no-bos -m " + shell_quoted(model) + " < " + text_file, &status),
              "15043 3186\n");
    std::string ids_file = temp_path("tokenize_ids.txt");
    std::ofstream(ids_file) << "1 15043 3186 2";
    EXPECT_EQ(run_command(pagoda_binary() + " tokenize --detok -m " + shell_quoted(model) + " < " + ids_file, &status),
              "Hello world\n");
    std::ofstream(ids_file) << "1 99999";
    run_command(pagoda_binary() + " tokenize --detok -m " + shell_quoted(model) + " < " + ids_file + " 2>/dev/null", &status);
    EXPECT_NE(status, 0) << "an out-of-range id must be an error";
}

TEST(TokenizeCommand, ParsesSpecialTokensOnlyWhenAsked) {
    std::string model = vocab_path("phi-3");
    PAGODA_REQUIRE_FIXTURE(model);
    std::string text_file = temp_path("tokenize_special.txt");
    std::ofstream(text_file) << "<|user|>";
    int status = -1;
    EXPECT_EQ(run_command(pagoda_binary() + " tokenize --special --no-bos -m " + shell_quoted(model) + " < " + text_file, &status),
              "32010\n");
    std::string plain = run_command(pagoda_binary() + " tokenize --no-bos -m " + shell_quoted(model) + " < " + text_file, &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(plain.find("32010"), std::string::npos) << plain;
}

}  // namespace
}  // namespace pagoda::test
