// `pagoda run --mmproj --image` through the built binary on a random Gemma 3 and its random
// projector (gen-model --mmproj): images change the greedy output, the output does not depend on how
// the prompt is chunked (an image runs whole in one step), several images are taken, and misuses are
// refused naming the fix; `pagoda chat --mmproj` takes images with /image PATH.
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <png.h>

#include "e2e/process.h"
#include "fixtures.h"
#include "vision/image_encode.h"

namespace pagoda::test {
namespace {

struct Files {
    std::string text, mm, red, noise;
};

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

const Files& files() {
    static const Files f = [] {
        Files out{temp_path("run-image-text.gguf"), temp_path("run-image-mmproj.gguf"), temp_path("run-image-red.png"),
                  temp_path("run-image-noise.png")};
        const auto r = run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::vector<uint16_t> red, noise;
        for (int i = 0; i < 40 * 30; ++i) {
            red.insert(red.end(), {230, 20, 20});
            noise.insert(noise.end(), {uint16_t((i * 97) % 256), uint16_t((i * 31 + 7) % 256), uint16_t((i * 13) % 256)});
        }
        write(out.red, encode_png(40, 30, PNG_COLOR_TYPE_RGB, 8, red));
        write(out.noise, encode_png(40, 30, PNG_COLOR_TYPE_RGB, 8, noise));
        return out;
    }();
    return f;
}

ProcessResult run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m", files().text, "-p", "the cat", "-n", "12", "--temp", "0", "--ids",
                                     "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pagoda(args);
}

TEST(RunImage, ImagesChangeTheGreedyOutputAndChunkingDoesNot) {
    const auto plain = run({});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const auto red = run({"--mmproj", files().mm, "--image", files().red});
    ASSERT_EQ(red.exit_code, 0) << red.err;
    const auto noise = run({"--mmproj", files().mm, "--image", files().noise});
    ASSERT_EQ(noise.exit_code, 0) << noise.err;
    EXPECT_FALSE(red.out.empty());
    EXPECT_NE(red.out, plain.out);
    EXPECT_NE(red.out, noise.out);
    // 16 soft tokens + <start/end_of_image> + "\n\n" twice + BOS + the text: more than the plain prompt.
    EXPECT_NE(red.err.find("prompt "), std::string::npos);
    // Chunks of 1 and 5 tokens: the image still runs whole in one step; the output is the same.
    for (const char* chunk : {"1", "5"}) {
        const auto chunked = run({"--mmproj", files().mm, "--image", files().red, "--chunk", chunk});
        ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
        EXPECT_EQ(chunked.out, red.out) << "--chunk " << chunk;
    }
    const auto two = run({"--mmproj", files().mm, "--image", files().red, "--image", files().noise});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_NE(two.out, red.out);
}

TEST(RunImage, MisusesAreRefused) {
    auto r = run({"--image", files().red});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--image needs --mmproj"), std::string::npos) << r.err;
    const std::string missing = temp_path("run-image-missing.png");
    std::remove(missing.c_str());
    r = run({"--mmproj", files().mm, "--image", missing});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("cannot be opened"), std::string::npos) << r.err;
    const std::string bad = temp_path("run-image-bad.png");
    write(bad, {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
    r = run({"--mmproj", files().mm, "--image", bad});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
    const std::string llama = temp_path("run-image-llama.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--arch", "llama", "-o", llama}).exit_code, 0);
    r = run_pagoda({"run", "-m", llama, "-p", "x", "-n", "2", "--mmproj", files().mm, "--image", files().red});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("images are read for Gemma 3, Gemma 4 and Qwen3-VL models only (this one is llama)"), std::string::npos) << r.err;
    // A Gemma 3 whose vocabulary lacks the image tokens (written without --mmproj).
    const std::string plain = temp_path("run-image-novocab.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads",
                          "2", "-o", plain}).exit_code, 0);
    r = run_pagoda({"run", "-m", plain, "-p", "x", "-n", "2", "--mmproj", files().mm, "--image", files().red});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("has no <start_of_image> token"), std::string::npos) << r.err;
}

// `pagoda chat --mmproj` with /image PATH: the image changes the reply, the same session replays
// alike, the next turn re-renders the image and finds its blocks in the prefix cache, and /image
// is refused without --mmproj or with a file that is no image (a script's turn error ends it).
ProcessResult chat(const std::string& input, std::vector<std::string> extra) {
    std::vector<std::string> args = {"chat", "-m", files().text, "--chat-template", "gemma3", "-n", "6", "--temp", "0",
                                     "-t", "1", "-v"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pagoda(args, input);
}

TEST(ChatImage, ImageTurnsAreRenderedExpandedAndCached) {
    const auto plain = chat("what is it\n", {});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const std::string script = "/image " + files().red + "\nwhat is it\nand now\n";
    const auto red = chat(script, {"--mmproj", files().mm});
    ASSERT_EQ(red.exit_code, 0) << red.err;
    EXPECT_NE(red.err.find("<start_of_image>what is it"), std::string::npos) << red.err;
    const auto first_reply = [](const std::string& out) { return out.substr(0, out.find('\n')); };
    EXPECT_NE(first_reply(red.out), first_reply(plain.out));
    const auto again = chat(script, {"--mmproj", files().mm});
    EXPECT_EQ(again.out, red.out);
    // Turn 2 re-renders turn 1 (16 soft tokens and the layout): its blocks come from the cache.
    const size_t at = red.err.find("turn 2: prompt ");
    ASSERT_NE(at, std::string::npos) << red.err;
    long long prompt = 0, cached = 0;
    ASSERT_EQ(std::sscanf(red.err.c_str() + at, "turn 2: prompt %lld tokens (%lld cached)", &prompt, &cached), 2)
        << red.err.substr(at, 80);
    EXPECT_GE(cached, 16);
    const auto noise = chat("/image " + files().noise + "\nwhat is it\n", {"--mmproj", files().mm});
    ASSERT_EQ(noise.exit_code, 0) << noise.err;
    EXPECT_NE(first_reply(noise.out), first_reply(red.out));

    auto r = chat(script, {});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("/image needs --mmproj"), std::string::npos) << r.err;
    const std::string bad = temp_path("chat-image-bad.png");
    write(bad, {'n', 'o', 'p', 'e'});
    r = chat("/image " + bad + "\nwhat\n", {"--mmproj", files().mm});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("is not a readable image"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
