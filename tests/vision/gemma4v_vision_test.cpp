// Gemma 4's vision side (gemma4v): the aspect-preserving resize against hand-computed sizes and
// PIL-bicubic pixels, the gemma4v mmproj read back and refused when corrupt (naming the key or
// tensor), and the CPU tower against the reference tower on images of two shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backend/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/gemma4v_preprocess.h"
#include "vision/gemma4v_tower.h"
#include "vision/mmproj.h"
#include "vision/random_mmproj.h"
#include "gemma4v_fixture.h"

namespace pagoda::test {
namespace {

using Size = std::pair<int64_t, int64_t>;

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Gemma4vPreprocess, ResizedSizesMatchHandComputedOnes) {
    auto size = [](int64_t w, int64_t h, int64_t patch, int64_t pool, int64_t budget) {
        const auto s = vision::gemma4v_resized_size(w, h, patch, pool, budget);
        return Size(s.width, s.height);
    };
    // Gemma 4's defaults (patch 16, pool 3, 280 tokens: 2520 patches, 645120 pixels, sides of 48).
    // 640 x 480: f = sqrt(645120 / 307200) = 1.4491; 480 f / 48 = 14.49 -> 14, 640 f / 48 = 19.32 -> 19.
    EXPECT_EQ(size(640, 480, 16, 3, 280), Size(912, 672));
    // 100 x 100 grows: f = 8.0319, 100 f / 48 = 16.73 -> 16 blocks a side (256 tokens).
    EXPECT_EQ(size(100, 100, 16, 3, 280), Size(768, 768));
    // 4000 x 4: the height rounds to 0 blocks -> one block, the width min(1000 x 48, 280 x 48).
    EXPECT_EQ(size(4000, 4, 16, 3, 280), Size(13440, 48));
    // The small projector the tests use (patch 4, pool 3, 16 tokens: sides of 12, 2304 pixels).
    EXPECT_EQ(size(30, 21, 4, 3, 16), Size(48, 36));
    EXPECT_EQ(size(13, 40, 4, 3, 16), Size(24, 84));
    EXPECT_NE(error_of([] { vision::gemma4v_resized_size(0, 4, 16, 3, 280); }), "");
}

TEST(Gemma4vPreprocess, PixelsAreBicubicRescaledAndPatchedRowMajor) {
    // 4 x 2 with patch 2, pool 2, 4 tokens (64 pixels): f = sqrt(8), 2f / 4 -> 1 block, 4f / 4 -> 2:
    // an 8 x 4 image, a 4 x 2 patch grid. Each row is 0 0 255 255 in every channel; PIL's bicubic
    // (a = -0.5) puts output x 3 at source 1.75 - 0.5: weights -0.0703125, 0.8671875, 0.2265625,
    // -0.0234375 over sources 0..3, so 255 (0.2265625 - 0.0234375) = 51.8 -> 52; x 4 mirrors it to
    // 255 x 0.796875 = 203.2 -> 203. The rows stay alike (a constant column resamples to itself).
    vision::Image im{.width = 4, .height = 2, .rgb = std::vector<uint8_t>(4 * 2 * 3)};
    for (int64_t y = 0; y < 2; ++y)
        for (int64_t x = 0; x < 4; ++x)
            for (int c = 0; c < 3; ++c) im.rgb[size_t((y * 4 + x) * 3 + c)] = x >= 2 ? 255 : 0;
    const vision::Patches p = vision::gemma4v_preprocess(im, 2, 2, 4, {.mean = {0, 0, 0}, .std = {1, 1, 1}});
    ASSERT_EQ(p.grid_w, 4);
    ASSERT_EQ(p.grid_h, 2);
    auto at = [&](int64_t x, int64_t y, int c) {  // pixel (x, y): patch (y / 2, x / 2), (c, y % 2, x % 2)
        return p.rows[size_t(((y / 2) * 4 + x / 2) * p.row_size() + (c * 2 + y % 2) * 2 + x % 2)];
    };
    EXPECT_FLOAT_EQ(at(3, 0, 0), float(52.0 / 255.0));
    EXPECT_FLOAT_EQ(at(4, 1, 1), float(203.0 / 255.0));
    EXPECT_FLOAT_EQ(at(3, 3, 2), float(52.0 / 255.0));
    EXPECT_FLOAT_EQ(at(7, 2, 0), 1.0f);
    EXPECT_FLOAT_EQ(at(0, 0, 0), 0.0f);
    // An image already at its size is not resampled: pixels pass through as p / 255.
    vision::Image square{.width = 8, .height = 8, .rgb = std::vector<uint8_t>(8 * 8 * 3)};
    for (size_t i = 0; i < square.rgb.size(); ++i) square.rgb[i] = uint8_t(i * 7 % 256);
    const vision::Patches q = vision::gemma4v_preprocess(square, 2, 2, 4, {.mean = {0, 0, 0}, .std = {1, 1, 1}});
    ASSERT_EQ(q.grid_w, 4);
    // pixel (5, 2), green: patch (1, 2) = row 6, offset (1, 0, 1).
    EXPECT_FLOAT_EQ(q.rows[size_t(6 * q.row_size() + (1 * 2 + 0) * 2 + 1)], float(double(((2 * 8 + 5) * 3 + 1) * 7 % 256) / 255.0));
}

TEST(Gemma4vMmproj, RandomProjectorReadsBack) {
    const auto p = gemma4v_projector(gemma4v_spec());
    const vision::VisionConfig c = vision::read_vision_config(*p->file);
    EXPECT_TRUE(c.gemma4v());
    EXPECT_FALSE(c.fixed_grid());
    EXPECT_EQ(c.pool, 3);
    EXPECT_EQ(c.max_soft_tokens, 16);
    EXPECT_EQ(c.pos_size, 32);
    EXPECT_TRUE(c.standardize);
    EXPECT_FLOAT_EQ(c.rope_theta, 100.0f);
    EXPECT_EQ(c.norm.mean[0], 0.0f);
    EXPECT_EQ(c.norm.std[2], 1.0f);
    EXPECT_EQ(c.token_width(), 24);
    EXPECT_NE(vision::describe(c).find("gemma4v vision tower: images of up to 16 tokens"), std::string::npos);
}

TEST(Gemma4vMmproj, CorruptProjectorsAreRefusedByName) {
    auto refused = [](const std::unique_ptr<Gemma4vProjector>& p) { return error_of([&] { vision::read_vision_config(*p->file); }); };
    auto without = [](const std::string& name) {
        return gemma4v_projector(gemma4v_spec(), {}, [name](gguf::TensorInfo& t) { return t.name != name; });
    };
    EXPECT_EQ(refused(without("v.blk.1.attn_k_norm.weight")), "mmproj.gguf: tensor v.blk.1.attn_k_norm.weight is missing");
    EXPECT_EQ(refused(without("v.blk.0.ffn_post_norm.weight")), "mmproj.gguf: tensor v.blk.0.ffn_post_norm.weight is missing");
    EXPECT_EQ(refused(without("mm.input_projection.weight")), "mmproj.gguf: tensor mm.input_projection.weight is missing");
    EXPECT_EQ(refused(without("v.std_scale")), "mmproj.gguf: tensor v.std_scale is missing");
    EXPECT_EQ(refused(gemma4v_projector(gemma4v_spec(), {}, [](gguf::TensorInfo& t) {
                  if (t.name == "v.position_embd.weight") t.shape = {32, 64};
                  return true;
              })),
              "mmproj.gguf: tensor v.position_embd.weight has shape [32, 64], expected [32, positions, 2] (a column and "
              "a row table)");
    EXPECT_EQ(refused(gemma4v_projector(gemma4v_spec(), {}, [](gguf::TensorInfo& t) {
                  if (t.name == "mm.input_projection.weight") t.shape = {24, 32};
                  return true;
              })),
              "mmproj.gguf: tensor mm.input_projection.weight has shape [24, 32], expected [32, 24]");
    EXPECT_EQ(refused(gemma4v_projector(gemma4v_spec(), [](auto& m) {
                  for (auto& kv : m)
                      if (kv.first == "clip.vision.projector.scale_factor") kv.second = gguf::Value::u32(0);
              })),
              "mmproj.gguf: clip.vision.projector.scale_factor is 0, expected 1..16");
    EXPECT_EQ(refused(gemma4v_projector(gemma4v_spec(), [](auto& m) {
                  for (auto& kv : m)
                      if (kv.first == "clip.vision.attention.head_count") kv.second = gguf::Value::u32(16);
              })),
              "mmproj.gguf: the vision head size 2 is not a multiple of 4 (2D RoPE: half the head per axis, NEOX pairs)");
    // A tensor the reader would not apply (a bias) is refused, not ignored.
    const std::vector<float> bias(32, 0.5f);
    EXPECT_EQ(refused(gemma4v_projector(gemma4v_spec(), {}, {}, [&](gguf::Writer& w) {
                  w.add_tensor("v.blk.0.attn_q.bias", gguf::GgmlType::F32, {32}, bias.data(), bias.size() * 4);
              })),
              "mmproj.gguf: tensor v.blk.0.attn_q.bias is not part of the gemma4v layout (pagoda would not apply it)");
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    return err / scale;
}

TEST(Gemma4vTower, CpuEqualsReferenceOnTwoShapes) {
    const auto p = gemma4v_projector(gemma4v_spec());
    auto cpu_backend = backend::make_backend("cpu"), ref_backend = backend::make_backend("reference");
    vision::Gemma4vTower cpu(*p->file, *cpu_backend), ref(*p->file, *ref_backend);
    // 30 x 21 -> 48 x 36: a 12 x 9 patch grid, 4 x 3 tokens.
    const vision::TowerInput wide = cpu.preprocess(gemma4v_noise_image(30, 21, 3));
    ASSERT_EQ(wide.grid_w, 4);
    ASSERT_EQ(wide.grid_h, 3);
    const std::vector<float> got = cpu.encode(wide.patches), want = ref.encode(wide.patches);
    ASSERT_EQ(got.size(), size_t(12 * 24));
    ASSERT_EQ(want.size(), got.size());
    EXPECT_LT(worst_relative(got, want), 1e-4);
    // 13 x 40 -> 24 x 84: 6 x 21 patches, 2 x 7 tokens (the arena and cache grow).
    const vision::TowerInput tall = cpu.preprocess(gemma4v_noise_image(13, 40, 4));
    ASSERT_EQ(tall.grid_w, 2);
    ASSERT_EQ(tall.grid_h, 7);
    const std::vector<float> got2 = cpu.encode(tall.patches), want2 = ref.encode(tall.patches);
    ASSERT_EQ(got2.size(), size_t(14 * 24));
    EXPECT_LT(worst_relative(got2, want2), 1e-4);
    EXPECT_EQ(cpu.encode(wide.patches), got);  // deterministic across sizes
    // The grid reaches the output: the same rows read as a transposed grid encode differently.
    vision::Patches swapped = wide.patches;
    std::swap(swapped.grid_w, swapped.grid_h);
    EXPECT_NE(cpu.encode(swapped), got);
    // A grid past the learned positions is refused by name.
    vision::Patches long_row{.grid_w = 36, .grid_h = 3, .patch = 4};
    long_row.rows.assign(size_t(long_row.count() * long_row.row_size()), 0.5f);
    EXPECT_EQ(error_of([&] { cpu.encode(long_row); }),
              "gemma4v vision tower: a 36x3 patch grid is past the 32 learned positions per axis");
}

}  // namespace
}  // namespace pagoda::test
