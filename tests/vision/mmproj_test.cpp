// mmproj loading: gen-model's random Gemma 3 projector reads back with the sizes written, and every
// defect (another architecture or projector, a missing or misshapen tensor, bad sizes) is refused
// naming the file and the key or tensor. Legacy FFN naming is recognised by shape.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/mmproj.h"
#include "vision/random_mmproj.h"

namespace pagoda::test {
namespace {

using vision::RandomMmprojSpec;

struct Written {
    gguf::Writer w;
    std::unique_ptr<gguf::File> file;
};

// The random projector, then a copy with `edit_keys` applied to its metadata and `edit_tensor` to
// each tensor (false drops it). The views borrow their writers' bytes, so both are kept to the end.
using Metadata = std::vector<std::pair<std::string, gguf::Value>>;
const gguf::File& mmproj(const RandomMmprojSpec& spec = {}, const std::function<void(Metadata&)>& edit_keys = {},
                         const std::function<bool(gguf::TensorInfo&)>& edit_tensor = {}) {
    static std::vector<std::unique_ptr<Written>> keep;
    auto base = std::make_unique<Written>();
    vision::build_random_mmproj(spec, base->w);
    base->file = base->w.view("mmproj.gguf");
    auto out = std::make_unique<Written>();
    Metadata metadata = base->file->metadata();
    if (edit_keys) edit_keys(metadata);
    for (const auto& [k, v] : metadata) out->w.set(k, v);
    for (gguf::TensorInfo t : base->file->tensors()) {
        if (edit_tensor && !edit_tensor(t)) continue;
        out->w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    }
    out->file = out->w.view("mmproj.gguf");
    keep.push_back(std::move(base));
    keep.push_back(std::move(out));
    return *keep.back()->file;
}

void set(Metadata& m, const std::string& key, gguf::Value v) {
    for (auto& kv : m)
        if (kv.first == key) kv.second = std::move(v);
}

std::string error_of(const gguf::File& f) {
    try {
        vision::read_vision_config(f);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Mmproj, RandomGemma3ProjectorReadsBack) {
    const auto& f = mmproj({.n_embd = 48, .n_ff = 96, .n_layers = 3, .n_heads = 6, .text_dim = 40});
    const auto c = vision::read_vision_config(f);
    EXPECT_EQ(c.projector, "gemma3");
    EXPECT_EQ(c.image_size, 64);
    EXPECT_EQ(c.patch_size, 8);
    EXPECT_EQ(c.n_embd, 48);
    EXPECT_EQ(c.n_ff, 96);
    EXPECT_EQ(c.n_layers, 3);
    EXPECT_EQ(c.head_dim(), 8);
    EXPECT_EQ(c.text_dim, 40);
    EXPECT_EQ(c.n_patches(), 64);
    EXPECT_EQ(c.n_image_tokens(), 16);
    EXPECT_EQ(c.ffn_up, "ffn_up");
    EXPECT_FLOAT_EQ(c.norm.mean[1], 0.5f);
    EXPECT_EQ(vision::describe(c),
              "gemma3 vision tower: 64x64 images, 8x8 patches, 3 layers, width 48, 6 heads, 16 image tokens of width 40");
}

TEST(Mmproj, Gemma3DefaultsPoolingToFour) {
    // 896 / 14 = 64 patches per side, pooled 4x4 -> 256 tokens: the released Gemma 3 shape, scaled down
    // to 112 / 14 = 8 per side -> 2 x 2 = 4 tokens when the scale factor key is absent.
    const auto& f = mmproj({.image_size = 112, .patch_size = 14, .pool = 4, .n_embd = 16, .n_ff = 16, .n_layers = 1,
                           .n_heads = 2},
                          [](Metadata& m) { set(m, "clip.vision.projector.scale_factor", gguf::Value::u32(4)); });
    EXPECT_EQ(vision::read_vision_config(f).n_image_tokens(), 4);
}

TEST(Mmproj, RefusesOtherFilesByName) {
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "general.architecture", gguf::Value::string("gemma3")); })),
              "mmproj.gguf: not a vision projector (mmproj) file: general.architecture is 'gemma3', expected 'clip'");
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.projector_type", gguf::Value::string("llava")); })),
              "mmproj.gguf: the 'llava' vision projector is not supported yet (supported: gemma3, qwen3vl_merger, gemma4v)");
    // Gemma 3's tensors under Qwen3-VL's projector type: the first tensor only Qwen3-VL has is named.
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.projector_type", gguf::Value::string("qwen3vl_merger")); })),
              "mmproj.gguf: tensor v.patch_embd.weight.1 is missing");
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.has_vision_encoder", gguf::Value::boolean(false)); })),
              "mmproj.gguf: the mmproj file has no vision encoder (clip.has_vision_encoder is not true)");
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.vision.patch_size", gguf::Value::u32(7)); })),
              "mmproj.gguf: image size 64 is not a multiple of the patch size 7");
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.vision.projector.scale_factor", gguf::Value::u32(3)); })),
              "mmproj.gguf: 8 patches per side do not pool by 3 (clip.vision.projector.scale_factor)");
    EXPECT_EQ(error_of(mmproj({}, [](Metadata& m) { set(m, "clip.vision.image_std", gguf::Value::f32s({0.5f, 0, 1})); })),
              "mmproj.gguf: clip.vision.image_std[1] is 0, expected positive");
}

TEST(Mmproj, RefusesMissingAndMisshapenTensors) {
    EXPECT_EQ(error_of(mmproj({}, {}, [](gguf::TensorInfo& t) { return t.name != "v.blk.1.attn_k.bias"; })),
              "mmproj.gguf: tensor v.blk.1.attn_k.bias is missing");
    EXPECT_EQ(error_of(mmproj({}, {}, [](gguf::TensorInfo& t) { return t.name != "mm.input_projection.weight"; })),
              "mmproj.gguf: tensor mm.input_projection.weight is missing");
    EXPECT_EQ(error_of(mmproj({}, {}, [](gguf::TensorInfo& t) {
                  if (t.name == "v.position_embd.weight") t.shape = {64, 32};
                  return true;
              })),
              "mmproj.gguf: tensor v.position_embd.weight has shape [64, 32], expected [32, 64]");
}

TEST(Mmproj, LegacyFfnNamesAreSwappedByShape) {
    // Older converters wrote fc1 (n_embd -> n_ff) as ffn_down and fc2 as ffn_up: swap the names.
    auto rename = [](std::string& name, const std::string& from, const std::string& to) {
        const auto at = name.find(from);
        if (at == std::string::npos) return false;
        name.replace(at, from.size(), to);
        return true;
    };
    const auto& f = mmproj({}, {}, [&](gguf::TensorInfo& t) {
        if (!rename(t.name, ".ffn_up.", ".ffn_down.")) rename(t.name, ".ffn_down.", ".ffn_up.");
        return true;
    });
    const auto c = vision::read_vision_config(f);
    EXPECT_EQ(c.ffn_up, "ffn_down");
    EXPECT_EQ(c.ffn_down, "ffn_up");
}

}  // namespace
}  // namespace pagoda::test
