// Not a benchmark and asserts no speed: tokenizes 1 MB of mixed text with each fixture vocabulary and
// prints the throughput, so a regression to quadratic behaviour is visible (and would time out).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

std::string mixed_megabyte() {
    static const char* parts[] = {
        "The quick brown fox jumps over the lazy dog. ", "Once upon a time, there was a little girl named Lily. ",
        "int main(int argc, char** argv) {\n    return argc > 1 ? 0 : 1;\n}\n", "Prices rose 12.5% to $1,234,567 in 2024.\n",
        "\xE4\xBB\x8A\xE5\xA4\xA9\xE5\xA4\xA9\xE6\xB0\x94\xE5\xBE\x88\xE5\xA5\xBD\xE3\x80\x82",
        "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 ",
        "\xF0\x9F\x98\x80\xF0\x9F\x9A\x80 ", "    indented line\twith tabs\n\n", "I'm sure they'll say it's fine. ",
    };
    std::mt19937 rng(7);
    std::string text;
    while (text.size() < (1u << 20)) {
        text += parts[rng() % std::size(parts)];
        text += std::to_string(rng() % 100000);
        text += ' ';
    }
    return text;
}

TEST(TokenizerSpeed, OneMegabyteOfMixedText) {
    std::string text = mixed_megabyte();
    for (const auto& name : all_vocab_names()) {
        const tokenizer::Tokenizer* tok = fixture_tokenizer(name);
        if (!tok) continue;
        auto start = std::chrono::steady_clock::now();
        auto ids = tok->encode(text);
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        auto dstart = std::chrono::steady_clock::now();
        std::string back = tok->decode(ids);
        double dseconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - dstart).count();
        std::printf("[ speed    ] %-15s encode %.2f MB/s (%zu tokens), decode %.2f MB/s\n", name.c_str(),
                    text.size() / 1e6 / seconds, ids.size(), back.size() / 1e6 / dseconds);
        EXPECT_EQ(back, text) << name;
    }
}

}  // namespace
}  // namespace pagoda::test
