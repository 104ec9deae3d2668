// `pagoda run --mmproj --image` on a random Qwen3-VL and its random qwen3vl_merger projector
// (gen-model --arch qwen3vl --mmproj): the greedy output is deterministic, changes with the image,
// does not depend on the prefill chunk, and equals an in-process reference that lays the prompt out
// by hand (<|vision_start|>, one <|image_pad|> per merged token, <|vision_end|>) and runs it through
// SequenceRunner with the encoder's embeddings and grid. Images of other sizes take other token
// counts; a corrupt image and a projector of the other family are refused by name; `pagoda chat`
// takes Qwen3-VL images with /image PATH.
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
#include "vision/qwen3vl_layout.h"

namespace pagoda::test {
namespace {

constexpr int kPredict = 10;

struct Files {
    std::string text, mm, wide, small;
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
        Files out{temp_path("run-qwen3vl-text.gguf"), temp_path("run-qwen3vl-mmproj.gguf"),
                  temp_path("run-qwen3vl-wide.png"), temp_path("run-qwen3vl-small.png")};
        const auto r = run_pagoda({"gen-model", "--arch", "qwen3vl", "--layers", "3", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        write(out.wide, png(64, 48, 1));   // 64 x 48 pixels: 8 x 6 patches of 8, 4 x 3 merged tokens
        write(out.small, png(40, 30, 2));  // resized to 32 x 32: 2 x 2 merged tokens
        return out;
    }();
    return f;
}

ProcessResult run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m", files().text, "-p", "the cat", "-n", std::to_string(kPredict),
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
    std::vector<int32_t> ids;
    int64_t prompt_tokens = 0;
};

// The same generation in process: the prompt built by hand, the images through ImageEncoder and
// SequenceRunner with their grids, greedy argmax for kPredict tokens.
Reference reference(const std::vector<std::string>& images) {
    std::shared_ptr<const gguf::File> file(gguf::File::open(files().text));
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    vision::ImageEncoder encoder(files().mm, "cpu", 1);
    const vision::Qwen3VlImageTokens ids{.start = special(*tok, "<|vision_start|>"), .end = special(*tok, "<|vision_end|>"),
                                         .pad = special(*tok, "<|image_pad|>")};
    std::vector<int32_t> prompt = tok->encode("");
    std::vector<model::ImageSpan> spans;
    for (const std::string& path : images) {
        vision::EncodedImage e = encoder.encode_file(path);
        const int64_t begin = vision::append_qwen3vl_image(prompt, ids, e.tokens());
        EXPECT_EQ(prompt[size_t(begin - 1)], ids.start);
        EXPECT_EQ(prompt.back(), ids.end);
        spans.push_back({.begin = begin, .rows = e.tokens(), .embeddings = std::move(e.embeddings), .hash = e.hash,
                         .grid_h = e.grid_h, .grid_w = e.grid_w});
    }
    const auto text = tok->encode("the cat", {.add_bos = false});
    prompt.insert(prompt.end(), text.begin(), text.end());
    auto model = model::open_step_model(file, {.backend = "cpu", .threads = 1, .tokens_wanted = 256});
    model::SequenceRunner runner(*model);
    runner.set_images(0, std::move(spans));
    std::vector<float> logits = runner.prefill(0, prompt);
    Reference out{.prompt_tokens = int64_t(prompt.size())};
    for (int i = 0; i < kPredict; ++i) {
        const auto next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        out.ids.push_back(next);
        if (i + 1 < kPredict) logits = runner.decode(0, next);
    }
    return out;
}

TEST(RunQwen3VlImage, OutputIsDeterministicAndMatchesSequenceRunner) {
    const auto plain = run({});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const auto wide = run({"--mmproj", files().mm, "--image", files().wide});
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    EXPECT_EQ(parse_ids(wide.out).size(), size_t(kPredict)) << wide.out;
    EXPECT_NE(wide.out, plain.out);
    const auto again = run({"--mmproj", files().mm, "--image", files().wide});
    EXPECT_EQ(again.out, wide.out);
    const Reference ref = reference({files().wide});
    EXPECT_EQ(parse_ids(wide.out), ref.ids);
    EXPECT_EQ(prompt_tokens(wide.err), ref.prompt_tokens) << wide.err;
    // The small image takes 4 tokens, the wide one 12: the prompts differ by 8.
    const auto small = run({"--mmproj", files().mm, "--image", files().small});
    ASSERT_EQ(small.exit_code, 0) << small.err;
    EXPECT_EQ(prompt_tokens(wide.err) - prompt_tokens(small.err), 8) << small.err;
    EXPECT_NE(small.out, wide.out);
    // An image runs whole in one step: chunking the prompt changes nothing.
    for (const char* chunk : {"1", "5"}) {
        const auto chunked = run({"--mmproj", files().mm, "--image", files().wide, "--chunk", chunk});
        ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
        EXPECT_EQ(chunked.out, wide.out) << "--chunk " << chunk;
    }
    const auto two = run({"--mmproj", files().mm, "--image", files().wide, "--image", files().small});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(parse_ids(two.out), reference({files().wide, files().small}).ids);
}

TEST(RunQwen3VlImage, MisusesAreRefusedByName) {
    const std::string bad = temp_path("run-qwen3vl-bad.png");
    write(bad, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 'b', 'r', 'o', 'k', 'e', 'n'});
    auto r = run({"--mmproj", files().mm, "--image", bad});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
    // Gemma 3's projector with Qwen3-VL's text model, and the other way round.
    const std::string gemma = temp_path("run-qwen3vl-gemma.gguf"), gemma_mm = temp_path("run-qwen3vl-gemma-mm.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads",
                          "2", "-o", gemma, "--mmproj", gemma_mm}).exit_code, 0);
    r = run({"--mmproj", gemma_mm, "--image", files().wide});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("a gemma3 projector is not for this qwen3vl model"), std::string::npos) << r.err;
    r = run_pagoda({"run", "-m", gemma, "-p", "x", "-n", "2", "--mmproj", files().mm, "--image", files().wide});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("a qwen3vl_merger projector is not for this gemma3 model"), std::string::npos) << r.err;
    // A Qwen3-VL whose vocabulary lacks the vision tokens (written without --mmproj).
    const std::string novocab = temp_path("run-qwen3vl-novocab.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--arch", "qwen3vl", "--layers", "3", "--dim", "64", "--heads", "4",
                          "--kv-heads", "2", "-o", novocab}).exit_code, 0);
    r = run_pagoda({"run", "-m", novocab, "-p", "x", "-n", "2", "--mmproj", files().mm, "--image", files().wide});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("has no <|vision_start|> token, which Qwen3-VL's image prompts need"), std::string::npos)
        << r.err;
    // chat refuses a projector of the other family at load.
    r = run_pagoda({"chat", "-m", files().text, "--chat-template", "chatml", "-n", "2", "--mmproj", gemma_mm}, "hi\n");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("a gemma3 projector is not for this M-RoPE model (qwen3vl)"), std::string::npos) << r.err;
}

// `pagoda chat --mmproj` with /image PATH on Qwen3-VL: chatml takes no content parts, so the image
// is Qwen's marker in the message text, expanded to the image's 12 pads; the image changes the
// reply, a replay is the same, and the next turn finds the image's blocks in the prefix cache.
TEST(RunQwen3VlImage, ChatTakesImages) {
    auto chat = [](const std::string& input, std::vector<std::string> extra) {
        std::vector<std::string> args = {"chat", "-m", files().text, "--chat-template", "chatml", "-n", "6", "--temp",
                                         "0", "-t", "1", "-v"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_pagoda(args, input);
    };
    const auto plain = chat("what is it\n", {});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const std::string script = "/image " + files().wide + "\nwhat is it\nand now\n";
    const auto wide = chat(script, {"--mmproj", files().mm});
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    EXPECT_NE(wide.err.find("<|vision_start|><|image_pad|><|vision_end|>what is it"), std::string::npos) << wide.err;
    const auto first_reply = [](const std::string& out) { return out.substr(0, out.find('\n')); };
    EXPECT_NE(first_reply(wide.out), first_reply(plain.out));
    EXPECT_EQ(chat(script, {"--mmproj", files().mm}).out, wide.out);
    const size_t at = wide.err.find("turn 2: prompt ");
    ASSERT_NE(at, std::string::npos) << wide.err;
    long long prompt = 0, cached = 0;
    ASSERT_EQ(std::sscanf(wide.err.c_str() + at, "turn 2: prompt %lld tokens (%lld cached)", &prompt, &cached), 2)
        << wide.err.substr(at, 80);
    EXPECT_GE(cached, 12);
}

}  // namespace
}  // namespace pagoda::test
