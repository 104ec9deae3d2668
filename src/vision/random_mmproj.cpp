// gen-model's mmproj writer (see random_mmproj.h).
#include "vision/random_mmproj.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/random_mmproj_parts.h"

namespace pagoda::vision {

using gguf::GgmlType;
using gguf::Value;

int64_t build_random_mmproj(const RandomMmprojSpec& s, gguf::Writer& w) {
    if (s.projector == "qwen3vl_merger") return build_random_qwen3vl_mmproj(s, w);
    if (s.projector == "gemma4v") return build_random_gemma4v_mmproj(s, w);
    if (s.projector != "gemma3")
        fail("gen-model: the mmproj projector '{}' is not supported (gemma3, qwen3vl_merger, gemma4v)", s.projector);
    if (s.image_size < 1 || s.patch_size < 1 || s.pool < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_layers < 1 ||
        s.n_heads < 1 || s.text_dim < 1)
        fail("gen-model: every mmproj size must be positive");
    if (s.image_size % s.patch_size || (s.image_size / s.patch_size) % s.pool)
        fail("gen-model: the mmproj image size {} must be a multiple of patch {} x pool {}", s.image_size, s.patch_size,
             s.pool);
    if (s.n_embd % s.n_heads) fail("gen-model: the mmproj width {} is not a multiple of {} heads", s.n_embd, s.n_heads);
    const int64_t d = s.n_embd, p = s.patch_size, n_patches = (s.image_size / p) * (s.image_size / p);
    mmproj_detail::write_clip_header(s, s.projector, s.image_size, w);
    w.set("clip.vision.projector.scale_factor", Value::u32(uint32_t(s.pool)));
    mmproj_detail::write_image_normalisation(w);

    mmproj_detail::MmprojAdder add(w, s.seed);
    const float in_scale = 1.0f / std::sqrt(float(d));
    // Pixels are in [-1, 1]: fan-in 3 p^2.
    add.tensor("v.patch_embd.weight", {p, p, 3, d}, 1.0f / std::sqrt(float(3 * p * p)), s.type);
    add.tensor("v.patch_embd.bias", {d}, 0.1f, GgmlType::F32);
    add.tensor("v.position_embd.weight", {d, n_patches}, 0.5f, s.type);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        add.layer_norm(b + "ln1", d);
        for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
            add.tensor(b + m + ".weight", {d, d}, in_scale, s.type);
            add.tensor(b + m + ".bias", {d}, 0.1f, GgmlType::F32);
        }
        add.tower_ffn(b, s);
    }
    add.layer_norm("v.post_ln", d);
    add.around_one("mm.soft_emb_norm.weight", d);
    add.tensor("mm.input_projection.weight", {s.text_dim, d}, in_scale, s.type);
    return add.params();
}

int64_t write_random_mmproj(const RandomMmprojSpec& spec, const std::string& path) {
    gguf::Writer w;
    const int64_t params = build_random_mmproj(spec, w);
    w.write(path);
    return params;
}

}  // namespace pagoda::vision
