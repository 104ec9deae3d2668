// ImageInput on a random Gemma 4 and its random gemma4v projector (gen-model --arch gemma4
// --mmproj): the template's <|image|> markers expand into Gemma 4's layout (<|image>, one <|image|>
// per pooled token, <image|>), each image's count by its shape, without a grid (Gemma's bidirectional
// attention inside the image); a gemma4v projector with another family's text model is refused.
#include <gtest/gtest.h>
#include <png.h>

#include "core/base64.h"
#include "core/error.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/image_input.h"
#include "tokenizer/tokenizer.h"
#include "vision/image_encode.h"

namespace pagoda::server {
namespace {

std::string data_url(int w, int h, uint16_t shade) {
    std::vector<uint16_t> px;
    for (int i = 0; i < w * h; ++i) px.insert(px.end(), {shade, uint16_t((i * 7) % 256), 40});
    return "data:image/png;base64," + pagoda::encode_base64(test::encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, px));
}

struct Model {
    std::string text, mm;
    std::unique_ptr<gguf::File> file;
    std::shared_ptr<const tokenizer::Tokenizer> tok;
};

const Model& model() {
    static const Model m = [] {
        Model out{test::temp_path("image-input-gemma4.gguf"), test::temp_path("image-input-gemma4-mmproj.gguf"), nullptr,
                  nullptr};
        const auto r = test::run_pagoda({"gen-model", "--arch", "gemma4", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        out.file = gguf::File::open(out.text);
        out.tok = tokenizer::Tokenizer::from_gguf(*out.file);
        return out;
    }();
    return m;
}

model::StepModelInfo text_model(const std::string& arch) {
    model::StepModelInfo info;
    info.config.arch = arch;
    info.config.dim = 64;  // gen-model's default width, the projector's output
    return info;
}

int32_t special(const std::string& text) {
    return model().tok->encode(text, {.add_bos = false, .add_eos = false, .parse_special = true}).at(0);
}

TEST(ImageInputGemma4, MarkersExpandIntoGemma4Layout) {
    ImageInput input(model().mm, "cpu", 1, *model().tok, text_model("gemma4"));
    EXPECT_EQ(input.tokens_per_image(), 0);  // by each image's shape
    EXPECT_EQ(input.marker(), "<|image|>");
    const int32_t start = special("<|image>"), end = special("<image|>"), soft = special("<|image|>");
    // Patch 8, pool 3, 16 tokens: 12 x 10 -> 96 x 72 (4 x 3 tokens); 50 x 10 -> 192 x 24 (8 x 1).
    std::vector<vision::EncodedImage> images = {input.encode(data_url(12, 10, 1), "a"), input.encode(data_url(50, 10, 2), "b")};
    ASSERT_EQ(images[0].tokens(), 12);
    ASSERT_EQ(images[1].tokens(), 8);
    const auto first = images[0].embeddings;
    std::vector<int32_t> prompt = {2, 30, soft, 31, soft, 32};
    const auto spans = input.expand(prompt, std::move(images));
    ASSERT_EQ(spans.size(), 2u);
    std::vector<int32_t> want = {2, 30, start};
    want.insert(want.end(), 12, soft);
    want.insert(want.end(), {end, 31, start});
    want.insert(want.end(), 8, soft);
    want.insert(want.end(), {end, 32});
    EXPECT_EQ(prompt, want);
    EXPECT_EQ(spans[0].begin, 3);
    EXPECT_EQ(spans[0].rows, 12);
    EXPECT_EQ(spans[1].begin, 3 + 12 + 3);
    EXPECT_EQ(spans[1].rows, 8);
    for (const auto& s : spans) EXPECT_EQ(s.grid_h, 0);  // no M-RoPE grid: bidirectional inside the image
    EXPECT_EQ(spans[0].embeddings, first);

    std::vector<int32_t> one = {2, soft, soft};
    try {
        input.expand(one, {input.encode(data_url(12, 10, 1), "a")});
        ADD_FAILURE() << "two markers for one image";
    } catch (const ApiError& e) {
        EXPECT_NE(std::string(e.what()).find("2 image markers (<|image|>)"), std::string::npos) << e.what();
    }
}

TEST(ImageInputGemma4, AnotherFamilysTextModelIsRefused) {
    try {
        ImageInput input(model().mm, "cpu", 1, *model().tok, text_model("gemma3"));
        ADD_FAILURE() << "a gemma4v projector with a gemma3 model";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("a gemma4v projector is not for this gemma3 model"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::server
