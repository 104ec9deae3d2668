// gen-model's gemma4v mmproj writer (see random_mmproj.h; tensors as gemma4v_tower.h lists).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/random_mmproj.h"
#include "vision/random_mmproj_parts.h"

namespace pagoda::vision {

using gguf::GgmlType;
using gguf::Value;

int64_t build_random_gemma4v_mmproj(const RandomMmprojSpec& s, gguf::Writer& w) {
    if (s.patch_size < 1 || s.pool < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_layers < 1 || s.n_heads < 1 ||
        s.text_dim < 1 || s.max_soft_tokens < 1 || s.pos_size < 1)
        fail("gen-model: every gemma4v mmproj size must be positive");
    if (s.n_embd % s.n_heads || (s.n_embd / s.n_heads) % 4)
        fail("gen-model: the mmproj width {} must be {} heads of a multiple of 4", s.n_embd, s.n_heads);
    const int64_t d = s.n_embd, p = s.patch_size, hd = d / s.n_heads;
    // The nominal image: the square that fills the budget (llama.cpp's converter writes the processor's).
    const int64_t side = int64_t(std::sqrt(double(s.max_soft_tokens))) * s.pool * p;
    mmproj_detail::write_clip_header(s, "gemma4v", side, w);
    w.set("clip.vision.projector.scale_factor", Value::u32(uint32_t(s.pool)));
    w.set("clip.vision.image_max_tokens", Value::u32(uint32_t(s.max_soft_tokens)));
    // Gemma 4 reads pixels in [0, 1]: no normalisation (the tower maps them to [-1, 1]).
    w.set("clip.vision.image_mean", Value::f32s({0.0f, 0.0f, 0.0f}));
    w.set("clip.vision.image_std", Value::f32s({1.0f, 1.0f, 1.0f}));

    mmproj_detail::MmprojAdder add(w, s.seed);
    const float in_scale = 1.0f / std::sqrt(float(d));
    add.tensor("v.patch_embd.weight", {p, p, 3, d}, 1.0f / std::sqrt(float(3 * p * p)), s.type);
    add.tensor("v.position_embd.weight", {d, s.pos_size, 2}, 0.5f, s.type);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        add.around_one(b + "ln1.weight", d);
        for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) add.tensor(b + m + ".weight", {d, d}, in_scale, s.type);
        add.around_one(b + "attn_q_norm.weight", hd);
        add.around_one(b + "attn_k_norm.weight", hd);
        add.around_one(b + "attn_post_norm.weight", d);
        add.around_one(b + "ln2.weight", d);
        add.tensor(b + "ffn_gate.weight", {d, s.n_ff}, in_scale, s.type);
        add.tensor(b + "ffn_up.weight", {d, s.n_ff}, in_scale, s.type);
        add.tensor(b + "ffn_down.weight", {s.n_ff, d}, 1.0f / std::sqrt(float(s.n_ff)), s.type);
        add.around_one(b + "ffn_post_norm.weight", d);
    }
    add.tensor("mm.input_projection.weight", {d, s.text_dim}, in_scale, s.type);
    if (s.standardize) {
        add.tensor("v.std_bias", {d}, 0.1f, GgmlType::F32);
        add.around_one("v.std_scale", d);
    }
    return add.params();
}

}  // namespace pagoda::vision
