// `pagoda run --mmproj --image` on a random Gemma 4 and its random gemma4v projector (gen-model --arch
// gemma4 --mmproj): the greedy output is deterministic, changes with the image, does not depend on
// the prefill chunk, and equals an in-process reference that lays the prompt out by hand (<|image>,
// one <|image|> per pooled token, <image|>, at the prompt's <__media__> markers) and runs it through
// SequenceRunner with the encoder's embeddings (no grid: Gemma's bidirectional attention inside each
// image). Images of other shapes take other token counts; the CPU and reference backends agree; a
// projector of another family is refused by name.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <png.h>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "tokenizer/tokenizer.h"
#include "vision/image_encode.h"
#include "vision/image_encoder.h"

namespace pagoda::test {
namespace {

constexpr int kPredict = 8;

struct Files {
    std::string text, mm, gemma3_mm, wide, flat;
};

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> png(int w, int h, int seed) {
    std::vector<uint16_t> rgb;
    for (int i = 0; i < w * h; ++i)
        rgb.insert(rgb.end(), {uint16_t((i * 97 + seed) % 256), uint16_t((i * 31 + 7 * seed) % 256), uint16_t((i * 13) % 256)});
    return encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
}

const Files& files() {
    static const Files f = [] {
        Files out{temp_path("run-gemma4-text.gguf"), temp_path("run-gemma4-mmproj.gguf"),
                  temp_path("run-gemma4-gemma3-mmproj.gguf"), temp_path("run-gemma4-wide.png"),
                  temp_path("run-gemma4-flat.png")};
        auto r = run_pagoda({"gen-model", "--arch", "gemma4", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        r = run_pagoda({"gen-model", "--arch", "gemma3", "-o", temp_path("run-gemma4-gemma3.gguf"), "--mmproj",
                        out.gemma3_mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        // Patch 8, pool 3, 16 tokens (9216 pixels, sides of 24): 64 x 48 -> 96 x 72, 4 x 3 tokens;
        // 50 x 25 -> 120 x 48, 5 x 2 tokens.
        write(out.wide, png(64, 48, 1));
        write(out.flat, png(50, 25, 2));
        return out;
    }();
    return f;
}

ProcessResult run(std::vector<std::string> extra, const std::string& prompt = "the cat") {
    std::vector<std::string> args = {"run", "-m", files().text, "-p", prompt, "-n", std::to_string(kPredict),
                                     "--temp", "0", "--ids", "--ignore-eos", "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pagoda(args);
}

std::vector<int32_t> parse_ids(const std::string& out) {
    std::istringstream in(out);
    std::vector<int32_t> ids;
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
}

long long prompt_tokens(const std::string& err) {
    const size_t at = err.find("| prompt ");
    long long n = -1;
    if (at != std::string::npos) std::sscanf(err.c_str() + at, "| prompt %lld", &n);
    return n;
}

int32_t special(const tokenizer::Tokenizer& t, const std::string& text) {
    const auto ids = t.encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
}

struct Reference {
    std::vector<int32_t> ids, prompt;
};

// The same generation in process: BOS, then per image the text before it and the image in Gemma 4's
// layout, then the last text; greedy argmax for kPredict tokens.
Reference reference(const std::vector<std::string>& texts, const std::vector<std::string>& images) {
    std::shared_ptr<const gguf::File> file(gguf::File::open(files().text));
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    vision::ImageEncoder encoder(files().mm, "cpu", 1);
    const vision::Gemma3ImageTokens ids{.start = special(*tok, "<|image>"), .end = special(*tok, "<image|>"),
                                        .soft = special(*tok, "<|image|>")};
    std::vector<int32_t> prompt = tok->encode("");
    std::vector<model::ImageSpan> spans;
    auto text = [&](const std::string& s, bool last) {
        const auto t = last ? tok->encode(s, {.add_bos = false}) : tok->encode(s, {.add_bos = false, .add_eos = false});
        prompt.insert(prompt.end(), t.begin(), t.end());
    };
    for (size_t i = 0; i < images.size(); ++i) {
        text(texts[i], false);
        vision::EncodedImage e = encoder.encode_file(images[i]);
        const int64_t begin = vision::append_gemma4_image(prompt, ids, e.tokens());
        EXPECT_EQ(prompt[size_t(begin - 1)], ids.start);
        EXPECT_EQ(prompt.back(), ids.end);
        spans.push_back({.begin = begin, .rows = e.tokens(), .embeddings = std::move(e.embeddings), .hash = e.hash});
    }
    text(texts.back(), true);
    auto model = model::open_step_model(file, {.backend = "cpu", .threads = 1, .tokens_wanted = 256});
    model::SequenceRunner runner(*model);
    runner.set_images(0, std::move(spans));
    std::vector<float> logits = runner.prefill(0, prompt);
    Reference out{.prompt = prompt};
    for (int i = 0; i < kPredict; ++i) {
        const auto next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        out.ids.push_back(next);
        if (i + 1 < kPredict) logits = runner.decode(0, next);
    }
    return out;
}

TEST(RunGemma4Image, OutputIsDeterministicAndMatchesSequenceRunner) {
    const auto plain = run({});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const auto wide = run({"--mmproj", files().mm, "--image", files().wide});
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    EXPECT_EQ(parse_ids(wide.out).size(), size_t(kPredict)) << wide.out;
    EXPECT_NE(wide.out, plain.out);
    EXPECT_EQ(run({"--mmproj", files().mm, "--image", files().wide}).out, wide.out);
    const Reference ref = reference({"", "the cat"}, {files().wide});
    EXPECT_EQ(parse_ids(wide.out), ref.ids);
    EXPECT_EQ(prompt_tokens(wide.err), int64_t(ref.prompt.size())) << wide.err;
    // The flat image takes 10 tokens, the wide one 12.
    const auto flat = run({"--mmproj", files().mm, "--image", files().flat});
    ASSERT_EQ(flat.exit_code, 0) << flat.err;
    EXPECT_EQ(prompt_tokens(wide.err) - prompt_tokens(flat.err), 2) << flat.err;
    EXPECT_NE(flat.out, wide.out);
    // An image runs whole in one step: chunking the prompt changes nothing (batch invariance).
    for (const char* chunk : {"1", "5"}) {
        const auto chunked = run({"--mmproj", files().mm, "--image", files().wide, "--chunk", chunk});
        ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
        EXPECT_EQ(chunked.out, wide.out) << "--chunk " << chunk;
    }
}

TEST(RunGemma4Image, TwoImagesAtTheMarkersMatchTheHandLayout) {
    const auto two = run({"--mmproj", files().mm, "--image", files().wide, "--image", files().flat},
                         "look <__media__> and <__media__> the cat");
    ASSERT_EQ(two.exit_code, 0) << two.err;
    const Reference ref = reference({"look ", " and ", " the cat"}, {files().wide, files().flat});
    EXPECT_EQ(parse_ids(two.out), ref.ids);
    EXPECT_EQ(prompt_tokens(two.err), int64_t(ref.prompt.size())) << two.err;
    // The layout itself: BOS, "look ", <|image>, 12 soft tokens, <image|>, " and ", <|image>, 10, <image|>, " the cat".
    std::shared_ptr<const gguf::File> file(gguf::File::open(files().text));
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const int32_t start = special(*tok, "<|image>"), end = special(*tok, "<image|>"), soft = special(*tok, "<|image|>");
    const auto& p = ref.prompt;
    EXPECT_EQ(std::count(p.begin(), p.end(), soft), 22);
    EXPECT_EQ(std::count(p.begin(), p.end(), start), 2);
    const auto first = std::find(p.begin(), p.end(), start) - p.begin();
    EXPECT_EQ(p[size_t(first + 13)], end);
    for (int64_t i = 1; i <= 12; ++i) EXPECT_EQ(p[size_t(first + i)], soft);
    const auto second = std::find(p.begin() + first + 1, p.end(), start) - p.begin();
    EXPECT_EQ(p[size_t(second + 11)], end);
}

TEST(RunGemma4Image, ReferenceBackendAgreesAndOtherProjectorsAreRefused) {
    const auto cpu = run({"--mmproj", files().mm, "--image", files().flat});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    const auto ref = run({"--mmproj", files().mm, "--image", files().flat, "--backend", "reference"});
    ASSERT_EQ(ref.exit_code, 0) << ref.err;
    EXPECT_EQ(ref.out, cpu.out);
    const auto wrong = run({"--mmproj", files().gemma3_mm, "--image", files().wide});
    EXPECT_NE(wrong.exit_code, 0);
    EXPECT_NE(wrong.err.find("a gemma3 projector is not for this gemma4 model"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace pagoda::test
