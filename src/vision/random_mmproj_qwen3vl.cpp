// gen-model's qwen3vl_merger mmproj writer (see random_mmproj.h; tensors as qwen3vl_tower.h lists).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/random_mmproj.h"
#include "vision/random_mmproj_parts.h"

namespace pagoda::vision {

using gguf::GgmlType;
using gguf::Value;

int64_t build_random_qwen3vl_mmproj(const RandomMmprojSpec& s, gguf::Writer& w) {
    if (s.patch_size < 1 || s.merge < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_layers < 1 || s.n_heads < 1 ||
        s.text_dim < 1 || s.pos_grid < 1 || s.min_pixels < 1 || s.max_pixels < s.min_pixels)
        fail("gen-model: every qwen3vl_merger mmproj size must be positive (and min pixels at most max pixels)");
    if (s.n_embd % s.n_heads || (s.n_embd / s.n_heads) % 4)
        fail("gen-model: the mmproj width {} must be {} heads of a multiple of 4", s.n_embd, s.n_heads);
    if (s.n_deepstack < 0 || s.n_deepstack > s.n_layers)
        fail("gen-model: {} deep-stack mergers for {} vision layers", s.n_deepstack, s.n_layers);
    const int64_t d = s.n_embd, p = s.patch_size, m = s.merge * s.merge * d;
    mmproj_detail::write_clip_header(s, "qwen3vl_merger", s.pos_grid * p, w);
    w.set("clip.vision.spatial_merge_size", Value::u32(uint32_t(s.merge)));
    w.set("clip.vision.image_min_pixels", Value::u32(uint32_t(s.min_pixels)));
    w.set("clip.vision.image_max_pixels", Value::u32(uint32_t(s.max_pixels)));
    mmproj_detail::write_image_normalisation(w);
    std::vector<Value> deepstack;
    for (int64_t l = 0; l < s.n_layers; ++l) deepstack.push_back(Value::boolean(l < s.n_deepstack));
    w.set("clip.vision.is_deepstack_layers", Value::array(gguf::ValueType::boolean, std::move(deepstack)));

    mmproj_detail::MmprojAdder add(w, s.seed);
    const float in_scale = 1.0f / std::sqrt(float(d));
    // Two temporal kernels over the same picture: each half the fan-in scale.
    for (const char* name : {"v.patch_embd.weight", "v.patch_embd.weight.1"})
        add.tensor(name, {p, p, 3, d}, 0.5f / std::sqrt(float(3 * p * p)), s.type);
    add.tensor("v.patch_embd.bias", {d}, 0.1f, GgmlType::F32);
    add.tensor("v.position_embd.weight", {d, s.pos_grid * s.pos_grid}, 0.5f, s.type);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        add.layer_norm(b + "ln1", d);
        add.tensor(b + "attn_qkv.weight", {d, 3 * d}, in_scale, s.type);
        add.tensor(b + "attn_qkv.bias", {3 * d}, 0.1f, GgmlType::F32);
        add.tensor(b + "attn_out.weight", {d, d}, in_scale, s.type);
        add.tensor(b + "attn_out.bias", {d}, 0.1f, GgmlType::F32);
        add.tower_ffn(b, s);
    }
    auto merger = [&](const std::string& norm, const std::string& fc1, const std::string& fc2, int64_t norm_width) {
        add.layer_norm(norm, norm_width);
        add.tensor(fc1 + ".weight", {m, m}, 1.0f / std::sqrt(float(m)), s.type);
        add.tensor(fc1 + ".bias", {m}, 0.1f, GgmlType::F32);
        add.tensor(fc2 + ".weight", {m, s.text_dim}, 1.0f / std::sqrt(float(m)), s.type);
        add.tensor(fc2 + ".bias", {s.text_dim}, 0.1f, GgmlType::F32);
    };
    merger("v.post_ln", "mm.0", "mm.2", d);
    for (int64_t l = 0; l < s.n_deepstack; ++l) {
        const std::string b = fmt::format("v.deepstack.{}.", l);
        merger(b + "norm", b + "fc1", b + "fc2", m);
    }
    return add.params();
}

}  // namespace pagoda::vision
