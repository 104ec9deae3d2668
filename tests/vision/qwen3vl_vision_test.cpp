// Qwen3-VL's vision side: smart resize and PIL bicubic against hand-computed values, the merge-
// window patch order, the qwen3vl_merger mmproj read back and refused when corrupt (naming the key
// or tensor), the position table's interpolation at the table's own grid, the CPU tower against the
// reference tower (deep-stack slices included), and the M-RoPE layout of a prompt with two images.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backend/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/mmproj.h"
#include "vision/qwen3vl_layout.h"
#include "vision/qwen3vl_preprocess.h"
#include "vision/qwen3vl_tower.h"
#include "vision/random_mmproj.h"
#include "vision/resize.h"

namespace pagoda::test {
namespace {

using vision::RandomMmprojSpec;

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

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

vision::Image noise_image(int64_t w, int64_t h, uint32_t seed) {
    std::mt19937 rng(seed);
    vision::Image im{.width = w, .height = h, .rgb = std::vector<uint8_t>(size_t(w * h * 3))};
    for (auto& v : im.rgb) v = uint8_t(rng() % 256);
    return im;
}

using Size = std::pair<int64_t, int64_t>;

TEST(Qwen3VlPreprocess, SmartResizeMatchesHandComputedSizes) {
    auto size = [](int64_t w, int64_t h, int64_t lo, int64_t hi) {
        const auto s = vision::qwen_smart_resize(w, h, 32, lo, hi);
        return std::pair(s.width, s.height);
    };
    EXPECT_EQ(size(640, 480, 65536, 16777216), Size(640, 480));  // already multiples
    // 80 / 32 = 2.5 and 48 / 32 = 1.5 round half to even: both to 2 blocks.
    EXPECT_EQ(size(80, 48, 1, 1 << 30), Size(64, 64));
    // 96 x 64 = 6144 < 65536: beta = sqrt(65536 / 5000) = 3.6204; ceil(100 b / 32) = 12, ceil(50 b / 32) = 6.
    EXPECT_EQ(size(100, 50, 65536, 16777216), Size(384, 192));
    // 9984^2 > 16777216: beta = sqrt(1e8 / 16777216) = 2.44140625, 10000 / beta / 32 = 128 blocks.
    EXPECT_EQ(size(10000, 10000, 65536, 16777216), Size(4096, 4096));
    EXPECT_EQ(error_of([] { vision::qwen_smart_resize(402, 2, 32, 1, 1 << 30); }),
              "image of 402x2: the aspect ratio must be below 200");
}

TEST(Qwen3VlPreprocess, BicubicMatchesHandComputedPil) {
    // 2 -> 4 pixels: centres 0.25 and 0.75 in the source. Keys' cubic (a = -0.5): at 0.25 0.8671875,
    // 1.25 -0.0703125, 0.75 0.2265625. Output 1: 255 x 0.2265625 / (0.8671875 + 0.2265625) = 52.8 -> 53;
    // output 0: 255 x -0.0703125 / 0.796875 < 0 -> clamped to 0; the others mirror them.
    vision::Image im{.width = 2, .height = 1, .rgb = {0, 10, 20, 255, 10, 20}};
    const vision::Image out = vision::resize_bicubic(im, 4, 1);
    ASSERT_EQ(out.rgb.size(), 12u);
    EXPECT_EQ(out.rgb[0], 0);
    EXPECT_EQ(out.rgb[3], 53);
    EXPECT_EQ(out.rgb[6], 202);
    EXPECT_EQ(out.rgb[9], 255);
    EXPECT_EQ(out.rgb[4], 10);  // a constant channel stays constant
}

TEST(Qwen3VlPreprocess, PatchesComeInMergeWindowOrder) {
    // 32 x 32 with patch 8 and merge 2 (factor 16) keeps its size: a 4 x 4 patch grid. Red holds
    // 8 x the column and green 8 x the row, so each row's first value names its patch.
    vision::Image im{.width = 32, .height = 32, .rgb = std::vector<uint8_t>(32 * 32 * 3)};
    for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) {
            im.rgb[size_t((y * 32 + x) * 3)] = uint8_t(8 * x);
            im.rgb[size_t((y * 32 + x) * 3 + 1)] = uint8_t(8 * y);
            im.rgb[size_t((y * 32 + x) * 3 + 2)] = 7;
        }
    const vision::Patches p = vision::qwen3vl_preprocess(im, 8, 2, 1, 1 << 20, {});
    ASSERT_EQ(p.grid_w, 4);
    ASSERT_EQ(p.grid_h, 4);
    auto norm = [](int v) { return (float(double(v) / 255.0) - 0.5f) / 0.5f; };
    // Row r: block (r / 4) of the 2 x 2 blocks, patch (r % 4) inside it, both row-major.
    const int64_t want_x[6] = {0, 8, 0, 8, 16, 24}, want_y[6] = {0, 0, 8, 8, 0, 0};
    for (int64_t r = 0; r < 6; ++r) {
        EXPECT_FLOAT_EQ(p.rows[size_t(r * p.row_size())], norm(int(8 * want_x[r]))) << r;            // red, (0, 0)
        EXPECT_FLOAT_EQ(p.rows[size_t(r * p.row_size() + 64)], norm(int(8 * want_y[r]))) << r;       // green
        EXPECT_FLOAT_EQ(p.rows[size_t(r * p.row_size() + 64 + 9)], norm(int(8 * (want_y[r] + 1)))) << r;  // y 1, x 1
    }
    EXPECT_FLOAT_EQ(p.rows[size_t(8 * p.row_size())], norm(0));  // row 8: block (1, 0), x 0
    EXPECT_FLOAT_EQ(p.rows[size_t(8 * p.row_size() + 64)], norm(8 * 16));
}

// The edited copy borrows the original's tensor bytes, so both writers live as long as it.
struct Projector {
    gguf::Writer base_w, w;
    std::unique_ptr<gguf::File> base, file;
};

std::unique_ptr<Projector> projector(const RandomMmprojSpec& spec,
                                     const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)>& keys = {},
                                     const std::function<bool(gguf::TensorInfo&)>& tensors = {}) {
    auto out = std::make_unique<Projector>();
    vision::build_random_mmproj(spec, out->base_w);
    out->base = out->base_w.view("mmproj.gguf");
    auto metadata = out->base->metadata();
    if (keys) keys(metadata);
    for (const auto& [k, v] : metadata) out->w.set(k, v);
    for (gguf::TensorInfo t : out->base->tensors()) {
        if (tensors && !tensors(t)) continue;
        out->w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    }
    out->file = out->w.view("mmproj.gguf");
    return out;
}

TEST(Qwen3VlMmproj, RandomProjectorReadsBack) {
    const auto p = projector(qwen_spec());
    const vision::VisionConfig c = vision::read_vision_config(*p->file);
    EXPECT_TRUE(c.qwen3vl());
    EXPECT_EQ(c.merge, 2);
    EXPECT_EQ(c.pos_grid, 6);
    EXPECT_EQ(c.min_pixels, 256);
    EXPECT_EQ(c.max_pixels, 1024);
    EXPECT_EQ(c.deepstack_layers, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(c.token_width(), 24 * 3);
    // No fixed image size or pool: the Gemma-3 counts are 0, not a division by zero (a fuzz finding).
    EXPECT_EQ(c.pool, 0);
    EXPECT_EQ(c.n_image_tokens(), 0);
}

TEST(Qwen3VlMmproj, CorruptProjectorsAreRefusedByName) {
    auto refused = [](const std::unique_ptr<Projector>& p) {
        return error_of([&] { vision::read_vision_config(*p->file); });
    };
    EXPECT_EQ(refused(projector(qwen_spec(), {}, [](gguf::TensorInfo& t) { return t.name != "v.patch_embd.weight.1"; })),
              "mmproj.gguf: tensor v.patch_embd.weight.1 is missing");
    EXPECT_EQ(refused(projector(qwen_spec(), {}, [](gguf::TensorInfo& t) { return t.name != "v.deepstack.1.fc2.bias"; })),
              "mmproj.gguf: tensor v.deepstack.1.fc2.bias is missing");
    EXPECT_EQ(refused(projector(qwen_spec(), {}, [](gguf::TensorInfo& t) {
                  if (t.name == "v.blk.2.attn_qkv.weight") t.shape = {96, 32};
                  return true;
              })),
              "mmproj.gguf: tensor v.blk.2.attn_qkv.weight has shape [96, 32], expected [32, 96]");
    EXPECT_EQ(refused(projector(qwen_spec(), [](auto& m) {
                  for (auto& kv : m)
                      if (kv.first == "clip.vision.is_deepstack_layers")
                          kv.second = gguf::Value::array(gguf::ValueType::boolean, {gguf::Value::boolean(true)});
              })),
              "mmproj.gguf: clip.vision.is_deepstack_layers has 1 entries, expected one per block (3)");
    EXPECT_EQ(refused(projector(qwen_spec(), [](auto& m) {
                  for (auto& kv : m)
                      if (kv.first == "clip.vision.image_min_pixels") kv.second = gguf::Value::u32(4096);
              })),
              "mmproj.gguf: clip.vision.image_min_pixels 4096 is above clip.vision.image_max_pixels 1024");
    EXPECT_EQ(refused(projector(qwen_spec(), {}, [](gguf::TensorInfo& t) {
                  if (t.name == "v.position_embd.weight") t.shape = {32, 9, 4};
                  return true;
              })),
              "mmproj.gguf: tensor v.position_embd.weight has shape [32, 9, 4], expected [32, side^2]");
}

TEST(Qwen3VlTower, PositionsAtTheTablesOwnGridAreItsRows) {
    // linspace(0, G - 1, G) hits the table's rows exactly; the rows come in merge-window order.
    const auto p = projector(qwen_spec());
    auto b = backend::make_backend("reference");
    vision::Qwen3VlTower tower(*p->file, *b);
    const std::vector<float> got = tower.interpolated_positions(6, 6);
    const auto* t = p->file->find_tensor("v.position_embd.weight");
    const auto* table = reinterpret_cast<const float*>(t->data);
    const int64_t d = 32;
    int64_t r = 0;
    for (int64_t by = 0; by < 3; ++by)
        for (int64_t bx = 0; bx < 3; ++bx)
            for (int64_t dy = 0; dy < 2; ++dy)
                for (int64_t dx = 0; dx < 2; ++dx, ++r) {
                    const int64_t cell = (2 * by + dy) * 6 + 2 * bx + dx;
                    for (int64_t i = 0; i < d; ++i) ASSERT_FLOAT_EQ(got[size_t(r * d + i)], table[cell * d + i]) << r;
                }
    // A 2 x 12 grid: columns at linspace(0, 5, 12); grid row 0, column 1 (merge-order row 1) lies
    // 5 / 11 of the way from table column 0 to column 1, on table row 0.
    const std::vector<float> wide = tower.interpolated_positions(2, 12);
    const double fx = 5.0 / 11.0;
    for (int64_t i = 0; i < d; ++i)
        EXPECT_NEAR(wide[size_t(d + i)], (1 - fx) * table[i] + fx * table[d + i], 1e-5);
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    return err / scale;
}

TEST(Qwen3VlTower, CpuEqualsReferenceWithDeepStackSlices) {
    const auto p = projector(qwen_spec());
    auto cpu_backend = backend::make_backend("cpu"), ref_backend = backend::make_backend("reference");
    vision::Qwen3VlTower cpu(*p->file, *cpu_backend), ref(*p->file, *ref_backend);
    const auto& c = cpu.config();
    // 30 x 21 -> 32 x 24 (factor 8, 768 pixels within 256..1024): an 8 x 6 patch grid, 12 tokens.
    const vision::Patches patches =
        vision::qwen3vl_preprocess(noise_image(30, 21, 3), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    ASSERT_EQ(patches.grid_w, 8);
    ASSERT_EQ(patches.grid_h, 6);
    const std::vector<float> got = cpu.encode(patches), want = ref.encode(patches);
    ASSERT_EQ(got.size(), size_t(12 * 72));
    ASSERT_EQ(want.size(), got.size());
    EXPECT_LT(worst_relative(got, want), 1e-4);
    // Each deep-stack slice is its own merger's output: slices differ from the main one.
    double diff = 0;
    for (int64_t i = 0; i < 24; ++i) diff += std::fabs(got[size_t(i)] - got[size_t(24 + i)]);
    EXPECT_GT(diff, 1e-3);
    // A larger image on the same tower (the arena and cache grow): 40 x 24 -> 10 x 6 patches, 15 tokens.
    const vision::Patches large =
        vision::qwen3vl_preprocess(noise_image(40, 24, 4), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    ASSERT_EQ(large.grid_w * large.grid_h, 60);
    const std::vector<float> got2 = cpu.encode(large), want2 = ref.encode(large);
    ASSERT_EQ(got2.size(), size_t(15 * 72));
    EXPECT_LT(worst_relative(got2, want2), 1e-4);
    EXPECT_EQ(cpu.encode(patches), got);  // deterministic across sizes
}

TEST(Qwen3VlTower, GridPositionsReachTheOutput) {
    // The same patch rows read as an 8 x 4 grid and as a 4 x 8 one: only the positions (the table's
    // interpolation and the 2D RoPE's rows and columns) differ, and so do the embeddings.
    const auto p = projector(qwen_spec());
    auto b = backend::make_backend("cpu");
    vision::Qwen3VlTower tower(*p->file, *b);
    const auto& c = tower.config();
    vision::Patches wide =
        vision::qwen3vl_preprocess(noise_image(32, 16, 4), c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    ASSERT_EQ(wide.grid_w, 8);
    ASSERT_EQ(wide.grid_h, 4);
    const auto a = tower.encode(wide);
    std::swap(wide.grid_w, wide.grid_h);
    const auto tall = tower.encode(wide);
    ASSERT_EQ(a.size(), tall.size());
    EXPECT_NE(a, tall);
}

TEST(Qwen3VlLayout, TwoImagesMatchAHandWrittenLayout) {
    // text 0..1, an image of 2 x 3 tokens at rows 2..7, text 8, an image of 2 x 1 at rows 9..10, text 11.
    const vision::ImagePlacement images[2] = {{.first = 2, .grid_h = 2, .grid_w = 3}, {.first = 9, .grid_h = 2, .grid_w = 1}};
    const std::vector<int32_t> got = vision::qwen3vl_rope_positions(12, images);
    const std::vector<int32_t> want = {
        0, 0, 0,  1, 1, 1,                                  // text
        2, 2, 2,  2, 2, 3,  2, 2, 4,  2, 3, 2,  2, 3, 3,  2, 3, 4,  // image 1: (2, 2 + row, 2 + col)
        5, 5, 5,                                            // text after 2 + max(2, 3)
        6, 6, 6,  6, 7, 6,                                  // image 2
        8, 8, 8};                                           // text after 6 + max(2, 1)
    EXPECT_EQ(got, want);
    EXPECT_EQ(vision::qwen3vl_text_rope_position(11, images), 8);
    EXPECT_EQ(vision::qwen3vl_text_rope_position(40, images), 37);
    EXPECT_NE(error_of([&] { vision::qwen3vl_rope_positions(10, images); }), "");
    std::vector<int32_t> prompt = {5};
    EXPECT_EQ(vision::append_qwen3vl_image(prompt, {.start = 1, .end = 2, .pad = 3}, 2), 2);
    EXPECT_EQ(prompt, (std::vector<int32_t>{5, 1, 3, 3, 2}));
}

}  // namespace
}  // namespace pagoda::test
