// `pagoda gen-model --mmproj FILE` through the built binary: the projector written beside a gemma3
// text model reads back as an mmproj whose projection width is the text model's embedding width, a
// tower runs on it, and the flag's misuses are refused naming the fix.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"
#include "vision/vision_tower.h"

namespace pagoda::test {
namespace {

TEST(GenModelMmproj, WritesAProjectorMatchingTheTextModel) {
    const std::string text = temp_path("vision-text.gguf"), mm = temp_path("vision-mmproj.gguf");
    const auto r = run_pagoda({"gen-model", "--arch", "gemma3", "--dim", "96", "--heads", "4", "--kv-heads", "2",
                               "-o", text, "--mmproj", mm, "--mmproj-image-size", "32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("gemma3 vision projector, 32x32 images, 4 image tokens"), std::string::npos) << r.err;
    const auto text_file = gguf::File::open(text), mm_file = gguf::File::open(mm);
    const auto c = vision::read_vision_config(*mm_file);
    EXPECT_EQ(c.text_dim, text_file->get_int("gemma3.embedding_length"));
    EXPECT_EQ(c.text_dim, 96);
    EXPECT_EQ(c.image_size, 32);
    EXPECT_EQ(c.n_image_tokens(), 4);
    auto b = backend::make_backend("cpu");
    vision::VisionTower tower(*mm_file, *b);
    vision::Image gray{.width = 10, .height = 10, .rgb = std::vector<uint8_t>(300, 128)};
    EXPECT_EQ(tower.encode(vision::siglip_preprocess(gray, c.image_size, c.patch_size, c.norm)).size(), size_t(4 * 96));
}

TEST(GenModelMmproj, MisusesAreRefused) {
    const std::string out = temp_path("vision-refused.gguf"), mm = temp_path("vision-refused-mmproj.gguf");
    auto r = run_pagoda({"gen-model", "--arch", "llama", "-o", out, "--mmproj", mm});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--mmproj writes Gemma 3's, Gemma 4's or Qwen3-VL's vision projector: it needs --arch gemma3, gemma4 or qwen3vl (got 'llama')"),
              std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "--arch", "gemma3", "-o", out, "--mmproj-image-size", "64"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--mmproj-image-size needs --mmproj"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "--arch", "gemma3", "-o", out, "--mmproj", mm, "--mmproj-image-size", "40"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the mmproj image size 40 must be a multiple of patch 8 x pool 2"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
