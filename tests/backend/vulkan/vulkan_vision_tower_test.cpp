// The vision towers on the Vulkan backend (issue 49: `--backend vulkan` runs the projector's tower
// there too): gen-model's random projectors of both families, Gemma 3's SigLIP (fixed square input;
// two projectors of different image sizes, so two patch counts), Gemma 4's gemma4v and Qwen3-VL's (2D RoPE, merge
// windows, deep-stack mergers; two image sizes on one tower, so the cache and arena grow), give
// image embeddings within the Vulkan model tests' tolerance (1e-5 of the largest) of the reference
// backend's, F16 projectors (the converters' default) too.
#include <cmath>
#include <gtest/gtest.h>
#include <random>

#include "backend/vulkan/vulkan_test_env.h"
#include "gguf/gguf.h"
#include "vision/gemma4v_tower.h"
#include "vision/preprocess.h"
#include "vision/qwen3vl_preprocess.h"
#include "vision/qwen3vl_tower.h"
#include "vision/random_mmproj.h"
#include "vision/vision_tower.h"

namespace pagoda::vision {
namespace {

Image noise_image(int64_t w, int64_t h, uint32_t seed) {
    std::mt19937 rng(seed);
    Image im{.width = w, .height = h, .rgb = std::vector<uint8_t>(size_t(w * h * 3))};
    for (auto& v : im.rgb) v = uint8_t(rng() % 256);
    return im;
}

// Every element within 1e-5 of the reference's largest magnitude; the outputs are not all zero.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    ASSERT_GT(scale, 1e-3) << what;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << what << ", element " << i;
}

TEST(VulkanVisionTower, Gemma3SiglipMatchesReferenceAtTwoImageSizes) {
    PAGODA_REQUIRE_VULKAN();
    auto vk = backend::make_backend("vulkan"), ref = backend::make_backend("reference");
    // 64 x 64 in 8 x 8 patches (64 patches, 16 tokens) and 96 x 96 (144 patches, 36 tokens).
    for (const int64_t size : {64, 96}) {
        gguf::Writer w;
        build_random_mmproj({.image_size = size, .n_embd = 32, .n_ff = 72, .n_layers = 2, .n_heads = 4, .text_dim = 48,
                             .seed = uint64_t(size)},
                            w);
        const auto file = w.view("mmproj.gguf");
        VisionTower on_vk(*file, *vk), on_ref(*file, *ref);
        const VisionConfig& c = on_vk.config();
        const Patches patches = siglip_preprocess(noise_image(50, 70, uint32_t(size)), c.image_size, c.patch_size, c.norm);
        const std::vector<float> got = on_vk.encode(patches), want = on_ref.encode(patches);
        ASSERT_EQ(got.size(), size_t(c.n_image_tokens() * 48));
        expect_close(got, want, size == 64 ? "64 x 64" : "96 x 96");
        EXPECT_EQ(on_vk.encode(patches), got) << "a second run is bitwise the same";
    }
}

RandomMmprojSpec qwen_spec() {
    RandomMmprojSpec s;
    s.projector = "qwen3vl_merger";
    s.patch_size = 4;
    s.n_embd = 32;
    s.n_ff = 48;
    s.n_layers = 3;
    s.n_heads = 4;
    s.text_dim = 24;
    s.pos_grid = 6;
    s.min_pixels = 256;
    s.max_pixels = 1024;
    s.n_deepstack = 2;
    return s;
}

TEST(VulkanVisionTower, Qwen3VlMatchesReferenceAtTwoImageSizes) {
    PAGODA_REQUIRE_VULKAN();
    gguf::Writer w;
    build_random_mmproj(qwen_spec(), w);
    const auto file = w.view("mmproj.gguf");
    auto vk = backend::make_backend("vulkan"), ref = backend::make_backend("reference");
    Qwen3VlTower on_vk(*file, *vk), on_ref(*file, *ref);
    const VisionConfig& c = on_vk.config();
    // 30 x 21 -> an 8 x 6 patch grid (12 tokens); 40 x 24 -> 10 x 6 (15 tokens), not square either
    // way, so rows and columns of the 2D RoPE and the position table cannot be swapped unseen.
    const Patches small = qwen3vl_preprocess(noise_image(30, 21, 3), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    const Patches large = qwen3vl_preprocess(noise_image(40, 24, 4), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    ASSERT_EQ(small.grid_w * small.grid_h, 48);
    ASSERT_EQ(large.grid_w * large.grid_h, 60);
    const std::vector<float> got = on_vk.encode(small);
    ASSERT_EQ(got.size(), size_t(12 * c.token_width()));
    expect_close(got, on_ref.encode(small), "8 x 6 patches");
    const std::vector<float> got_large = on_vk.encode(large);
    ASSERT_EQ(got_large.size(), size_t(15 * c.token_width()));
    expect_close(got_large, on_ref.encode(large), "10 x 6 patches");
    EXPECT_EQ(on_vk.encode(small), got) << "the smaller image again, after the tower grew: bitwise the same";
}

TEST(VulkanVisionTower, Gemma4vMatchesReferenceAtTwoImageShapes) {
    // Gemma 4's tower: RMSNorm sandwich, per-head q/k/v norms, the 2D RoPE's column and row halves,
    // attention at scale 1, GeGLU, the pooler; a wide and a tall image on one tower (it grows).
    PAGODA_REQUIRE_VULKAN();
    RandomMmprojSpec s;
    s.projector = "gemma4v";
    s.patch_size = 4;
    s.pool = 3;
    s.n_embd = 32;
    s.n_ff = 48;
    s.n_heads = 2;
    s.text_dim = 24;
    s.max_soft_tokens = 16;
    s.pos_size = 32;
    s.standardize = true;
    gguf::Writer w;
    build_random_mmproj(s, w);
    const auto file = w.view("mmproj.gguf");
    auto vk = backend::make_backend("vulkan"), ref = backend::make_backend("reference");
    Gemma4vTower on_vk(*file, *vk), on_ref(*file, *ref);
    // 30 x 21 -> 12 x 9 patches (4 x 3 tokens); 13 x 40 -> 6 x 21 patches (2 x 7 tokens).
    const TowerInput wide = on_vk.preprocess(noise_image(30, 21, 3)), tall = on_vk.preprocess(noise_image(13, 40, 4));
    ASSERT_EQ(wide.grid_w * wide.grid_h, 12);
    ASSERT_EQ(tall.grid_w * tall.grid_h, 14);
    const std::vector<float> got = on_vk.encode(wide.patches);
    ASSERT_EQ(got.size(), size_t(12 * 24));
    expect_close(got, on_ref.encode(wide.patches), "12 x 9 patches");
    expect_close(on_vk.encode(tall.patches), on_ref.encode(tall.patches), "6 x 21 patches");
    EXPECT_EQ(on_vk.encode(wide.patches), got) << "the wide image again, after the tower grew: bitwise the same";
}

TEST(VulkanVisionTower, F16ProjectorsMatchReference) {
    // mmproj files are usually F16 (the converter's default): the matmul and embedding-table kernels
    // read F16 weights on both families' towers.
    PAGODA_REQUIRE_VULKAN();
    auto vk = backend::make_backend("vulkan"), ref = backend::make_backend("reference");
    {
        gguf::Writer w;
        build_random_mmproj({.type = gguf::GgmlType::F16}, w);
        const auto file = w.view("mmproj.gguf");
        VisionTower on_vk(*file, *vk), on_ref(*file, *ref);
        const VisionConfig& c = on_vk.config();
        const Patches patches = siglip_preprocess(noise_image(64, 64, 9), c.image_size, c.patch_size, c.norm);
        expect_close(on_vk.encode(patches), on_ref.encode(patches), "gemma3 f16");
    }
    RandomMmprojSpec spec = qwen_spec();
    spec.type = gguf::GgmlType::F16;
    gguf::Writer w;
    build_random_mmproj(spec, w);
    const auto file = w.view("mmproj.gguf");
    Qwen3VlTower on_vk(*file, *vk), on_ref(*file, *ref);
    const VisionConfig& c = on_vk.config();
    const Patches patches = qwen3vl_preprocess(noise_image(30, 21, 5), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    expect_close(on_vk.encode(patches), on_ref.encode(patches), "qwen3vl_merger f16");
}

}  // namespace
}  // namespace pagoda::vision
