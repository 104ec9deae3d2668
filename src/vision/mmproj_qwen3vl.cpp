// The qwen3vl_merger projector's metadata and tensors (mmproj.h), as llama.cpp's converter writes
// Qwen3-VL's vision tower (tensor list in qwen3vl_tower.h). Every key and tensor is checked before
// anything is uploaded; errors name the file and the key or tensor.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/mmproj.h"

namespace pagoda::vision {

namespace {

int64_t optional_positive(const gguf::File& f, const std::string& key, int64_t fallback, int64_t limit) {
    if (!f.has(key)) return fallback;
    const int64_t v = f.get_int(key);
    if (v < 1 || v > limit) fail("{}: {} is {}, expected 1..{}", f.name(), key, v, limit);
    return v;
}

}  // namespace

void read_qwen3vl_config(const gguf::File& f, VisionConfig& c) {
    c.merge = optional_positive(f, "clip.vision.spatial_merge_size", 2, 16);
    // transformers' Qwen3-VL processor: shortest_edge 65536 and longest_edge 16777216 pixels.
    c.min_pixels = optional_positive(f, "clip.vision.image_min_pixels", 65536, int64_t(1) << 30);
    c.max_pixels = optional_positive(f, "clip.vision.image_max_pixels", 16777216, int64_t(1) << 30);
    if (c.min_pixels > c.max_pixels)
        fail("{}: clip.vision.image_min_pixels {} is above clip.vision.image_max_pixels {}", f.name(), c.min_pixels,
             c.max_pixels);
    c.rope_theta = float(f.get_float_or("clip.vision.rope.freq_base", 10000.0));
    if (!(c.rope_theta > 1)) fail("{}: clip.vision.rope.freq_base is {}, expected above 1", f.name(), c.rope_theta);
    if (c.head_dim() % 4)
        fail("{}: the vision head size {} is not a multiple of 4 (2D RoPE: a quarter of the pairs per axis)", f.name(),
             c.head_dim());
    const std::string ds_key = "clip.vision.is_deepstack_layers";
    if (const auto* v = f.find(ds_key)) {
        const auto* items = v->as_array();
        if (!items || items->element_type != gguf::ValueType::boolean)
            fail("{}: {} is not an array of booleans", f.name(), ds_key);
        if (int64_t(items->items.size()) != c.n_layers)
            fail("{}: {} has {} entries, expected one per block ({})", f.name(), ds_key, items->items.size(), c.n_layers);
        for (size_t l = 0; l < items->items.size(); ++l)
            if (std::get<bool>(items->items[l].data)) c.deepstack_layers.push_back(int32_t(l));
    }

    const int64_t d = c.n_embd, p = c.patch_size, m = c.merge * c.merge * d;
    expect_mmproj_tensor(f, "v.patch_embd.weight", {p, p, 3, d});
    expect_mmproj_tensor(f, "v.patch_embd.weight.1", {p, p, 3, d});  // the conv3d's second temporal slice
    expect_mmproj_tensor(f, "v.patch_embd.bias", {d});
    const auto* pos = f.find_tensor("v.position_embd.weight");
    if (!pos) fail("{}: tensor v.position_embd.weight is missing", f.name());
    if (pos->shape.size() != 2 || pos->shape[0] != d)
        fail("{}: tensor v.position_embd.weight has shape [{}], expected [{}, side^2]", f.name(), fmt::join(pos->shape, ", "), d);
    c.pos_grid = int64_t(std::llround(std::sqrt(double(pos->shape[1]))));
    if (c.pos_grid * c.pos_grid != pos->shape[1])
        fail("{}: tensor v.position_embd.weight has {} positions, not a square grid", f.name(), pos->shape[1]);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        expect_mmproj_tensor(f, b + "attn_qkv.weight", {d, 3 * d});
        expect_mmproj_tensor(f, b + "attn_qkv.bias", {3 * d});
        expect_mmproj_tensor(f, b + "attn_out.weight", {d, d});
        expect_mmproj_tensor(f, b + "attn_out.bias", {d});
        for (const char* n : {"ln1", "ln2"}) {
            expect_mmproj_tensor(f, b + n + ".weight", {d});
            expect_mmproj_tensor(f, b + n + ".bias", {d});
        }
        expect_mmproj_tensor(f, b + "ffn_up.weight", {d, c.n_ff});
        expect_mmproj_tensor(f, b + "ffn_up.bias", {c.n_ff});
        expect_mmproj_tensor(f, b + "ffn_down.weight", {c.n_ff, d});
        expect_mmproj_tensor(f, b + "ffn_down.bias", {d});
    }
    auto merger = [&](const std::string& norm, const std::string& fc1, const std::string& fc2, int64_t norm_width) {
        expect_mmproj_tensor(f, norm + ".weight", {norm_width});
        expect_mmproj_tensor(f, norm + ".bias", {norm_width});
        expect_mmproj_tensor(f, fc1 + ".weight", {m, m});
        expect_mmproj_tensor(f, fc1 + ".bias", {m});
        expect_mmproj_tensor(f, fc2 + ".weight", {m, c.text_dim});
        expect_mmproj_tensor(f, fc2 + ".bias", {c.text_dim});
    };
    merger("v.post_ln", "mm.0", "mm.2", d);  // the main merger normalises each patch before the 2x2 shuffle
    for (int32_t l : c.deepstack_layers) {
        const std::string b = fmt::format("v.deepstack.{}.", l);
        merger(b + "norm", b + "fc1", b + "fc2", m);  // a deep-stack merger normalises after it
    }
    for (const auto& t : f.tensors())
        if (t.shape.size() == 1 && t.type != gguf::GgmlType::F32 && t.type != gguf::GgmlType::F16)
            fail("{}: tensor {} is {}, expected F32 or F16", f.name(), t.name, gguf::type_traits(t.type).name);
}

}  // namespace pagoda::vision
