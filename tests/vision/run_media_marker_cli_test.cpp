// `pagoda run --mmproj --image` with llama.cpp's <__media__> markers in the prompt, on random Gemma 3
// and Qwen3-VL models and their random projectors (gen-model --mmproj): image i goes where marker i
// stands. The greedy tokens equal an in-process reference that writes the prompt out by hand (BOS,
// the text pieces' ids, each image in the model's layout) and runs it through SequenceRunner with
// the encoder's embeddings (and Qwen3-VL's grids, whose M-RoPE positions the text after each image
// continues from). A marker before all text is the same as no marker; a marker count other than the
// --image count is refused naming both. `pagoda chat` places /image attachments at a message's markers.
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
    std::string text, mm, a, b;
};

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// seed 0: plain red; else a pattern of the seed.
std::vector<uint8_t> png(int w, int h, int seed) {
    std::vector<uint16_t> rgb;
    for (int i = 0; i < w * h; ++i) {
        if (seed == 0)
            rgb.insert(rgb.end(), {230, 20, 20});
        else
            rgb.insert(rgb.end(), {uint16_t((i * 97 + seed) % 256), uint16_t((i * 31 + 7 * seed) % 256),
                                   uint16_t((i * 13) % 256)});
    }
    return encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
}

// gen-model's random model of `arch` ("gemma3" or "qwen3vl") with its projector, and two images
// (a pattern and plain red; for Qwen3-VL 64 x 48 pixels: 4 x 3 merged tokens; 40 x 30: 2 x 2).
Files make_files(const std::string& arch) {
    Files out{temp_path("run-media-" + arch + ".gguf"), temp_path("run-media-" + arch + "-mmproj.gguf"),
              temp_path("run-media-" + arch + "-a.png"), temp_path("run-media-" + arch + "-b.png")};
    const std::string layers = arch == "qwen3vl" ? "3" : "2";
    const auto r = run_pagoda({"gen-model", "--arch", arch, "--layers", layers, "--dim", "64", "--heads", "4",
                               "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    write(out.a, png(64, 48, 1));
    write(out.b, png(40, 30, 0));
    return out;
}

const Files& files(const std::string& arch) {
    static const Files gemma = make_files("gemma3"), qwen = make_files("qwen3vl");
    return arch == "gemma3" ? gemma : qwen;
}

ProcessResult run(const std::string& arch, const std::string& prompt, const std::vector<std::string>& images) {
    std::vector<std::string> args = {"run", "-m", files(arch).text, "--mmproj", files(arch).mm, "-p", prompt, "-n",
                                     std::to_string(kPredict), "--temp", "0", "--ids", "--ignore-eos", "-t", "1"};
    for (const std::string& image : images) args.insert(args.end(), {"--image", image});
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

// The prompt written out by hand: BOS, then each of `text` (ids without BOS; the last with the
// vocabulary's EOS setting) followed by images[i] in the model's layout; greedy argmax in process.
Reference reference(const std::string& arch, const std::vector<std::string>& text,
                    const std::vector<std::string>& images) {
    EXPECT_EQ(text.size(), images.size() + 1);
    std::shared_ptr<const gguf::File> file(gguf::File::open(files(arch).text));
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    vision::ImageEncoder encoder(files(arch).mm, "cpu", 1);
    const bool qwen = arch == "qwen3vl";
    std::vector<int32_t> prompt = tok->encode("");
    std::vector<model::ImageSpan> spans;
    const auto append = [&](const std::vector<int32_t>& ids) { prompt.insert(prompt.end(), ids.begin(), ids.end()); };
    const std::vector<int32_t> newlines = tok->encode("\n\n", {.add_bos = false, .add_eos = false});
    for (size_t i = 0; i < text.size(); ++i) {
        const bool last = i + 1 == text.size();
        append(last ? tok->encode(text[i], {.add_bos = false})
                    : tok->encode(text[i], {.add_bos = false, .add_eos = false}));
        if (last) break;
        vision::EncodedImage e = encoder.encode_file(images[i]);
        // Gemma 3: "\n\n" <start_of_image> soft x n <end_of_image> "\n\n";
        // Qwen3-VL: <|vision_start|> <|image_pad|> x n <|vision_end|>.
        if (!qwen) append(newlines);
        prompt.push_back(special(*tok, qwen ? "<|vision_start|>" : "<start_of_image>"));
        const int64_t begin = int64_t(prompt.size());
        prompt.insert(prompt.end(), size_t(e.tokens()), special(*tok, qwen ? "<|image_pad|>" : "<image_soft_token>"));
        prompt.push_back(special(*tok, qwen ? "<|vision_end|>" : "<end_of_image>"));
        if (!qwen) append(newlines);
        model::ImageSpan span{
            .begin = begin, .rows = e.tokens(), .embeddings = std::move(e.embeddings), .hash = e.hash};
        if (qwen) {
            span.grid_h = e.grid_h;
            span.grid_w = e.grid_w;
        }
        spans.push_back(std::move(span));
    }
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

class RunMediaMarker : public ::testing::TestWithParam<std::string> {};

TEST_P(RunMediaMarker, OneImageAtItsMarkerMatchesSequenceRunner) {
    const std::string arch = GetParam();
    const auto got = run(arch, "the cat <__media__> sat on", {files(arch).a});
    ASSERT_EQ(got.exit_code, 0) << got.err;
    const Reference want = reference(arch, {"the cat ", " sat on"}, {files(arch).a});
    EXPECT_EQ(parse_ids(got.out), want.ids);
    EXPECT_EQ(prompt_tokens(got.err), want.prompt_tokens) << got.err;
    // Where the image stands matters: images first (no marker) is another prompt.
    const auto first = run(arch, "the cat  sat on", {files(arch).a});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_EQ(parse_ids(first.out), reference(arch, {"", "the cat  sat on"}, {files(arch).a}).ids);
    EXPECT_NE(first.out, got.out);
}

TEST_P(RunMediaMarker, MarkerFirstIsNoMarker) {
    const std::string arch = GetParam();
    const auto marked = run(arch, "<__media__>the cat", {files(arch).a});
    ASSERT_EQ(marked.exit_code, 0) << marked.err;
    const auto plain = run(arch, "the cat", {files(arch).a});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(parse_ids(marked.out).size(), size_t(kPredict)) << marked.out;
    EXPECT_EQ(marked.out, plain.out);
    EXPECT_EQ(prompt_tokens(marked.err), prompt_tokens(plain.err)) << marked.err;
}

TEST_P(RunMediaMarker, TwoImagesAtTwoMarkers) {
    const std::string arch = GetParam();
    const auto got = run(arch, "look <__media__> and then <__media__> ok", {files(arch).a, files(arch).b});
    ASSERT_EQ(got.exit_code, 0) << got.err;
    const Reference want = reference(arch, {"look ", " and then ", " ok"}, {files(arch).a, files(arch).b});
    EXPECT_EQ(parse_ids(got.out), want.ids);
    EXPECT_EQ(prompt_tokens(got.err), want.prompt_tokens) << got.err;
    // The images swapped: each goes to the other marker.
    const auto swapped = run(arch, "look <__media__> and then <__media__> ok", {files(arch).b, files(arch).a});
    ASSERT_EQ(swapped.exit_code, 0) << swapped.err;
    EXPECT_EQ(parse_ids(swapped.out),
              reference(arch, {"look ", " and then ", " ok"}, {files(arch).b, files(arch).a}).ids);
    EXPECT_NE(swapped.out, got.out);
}

TEST_P(RunMediaMarker, MarkerCountOtherThanImageCountIsRefused) {
    const std::string arch = GetParam();
    auto r = run(arch, "a <__media__> b <__media__>", {files(arch).a});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the prompt holds 2 <__media__> markers for 1 --image files"), std::string::npos) << r.err;
    r = run(arch, "a <__media__> b", {files(arch).a, files(arch).b});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the prompt holds 1 <__media__> markers for 2 --image files"), std::string::npos) << r.err;
}

// `pagoda chat --mmproj`: a message's <__media__> markers place its /image attachments; gemma3's
// template takes image parts (and trims the text parts around them), chatml gets Qwen3-VL's marker
// in the text. A marker before all text is the same as none; a count mismatch is refused by name.
ProcessResult chat(const std::string& arch, const std::string& input) {
    return run_pagoda({"chat", "-m", files(arch).text, "--mmproj", files(arch).mm, "--chat-template",
                       arch == "gemma3" ? "gemma3" : "chatml", "-n", "6", "--temp", "0", "-t", "1", "-v"},
                      input);
}

TEST(ChatMediaMarker, MarkersPlaceTheAttachedImages) {
    for (const std::string arch : {"gemma3", "qwen3vl"}) {
        SCOPED_TRACE(arch);
        const std::string image = arch == "gemma3" ? "<start_of_image>" : "<|vision_start|><|image_pad|><|vision_end|>";
        const std::string a = "/image " + files(arch).a + "\n", b = "/image " + files(arch).b + "\n";
        const auto two = chat(arch, a + b + "look <__media__> and then <__media__> ok\n");
        ASSERT_EQ(two.exit_code, 0) << two.err;
        const std::string want = arch == "gemma3" ? "look" + image + "and then" + image + "ok"
                                                  : "look " + image + " and then " + image + " ok";
        EXPECT_NE(two.err.find(want), std::string::npos) << two.err;
        const auto marked = chat(arch, a + "<__media__>what is it\n");
        ASSERT_EQ(marked.exit_code, 0) << marked.err;
        const auto plain = chat(arch, a + "what is it\n");
        ASSERT_EQ(plain.exit_code, 0) << plain.err;
        EXPECT_NE(marked.err.find(image + "what is it"), std::string::npos) << marked.err;
        EXPECT_EQ(marked.out, plain.out);
        const auto wrong = chat(arch, a + "a <__media__> b <__media__>\n");
        EXPECT_NE(wrong.exit_code, 0);
        EXPECT_NE(wrong.err.find("the message holds 2 <__media__> markers for 1 attached images (/image)"),
                  std::string::npos)
            << wrong.err;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, RunMediaMarker, ::testing::Values("gemma3", "qwen3vl"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagoda::test
