// gen-model's mmproj writer (see random_mmproj.h).
#include "vision/random_mmproj.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_tensors.h"

namespace pagoda::vision {

using gguf::GgmlType;
using gguf::Value;
using model::random_detail::Rng;
using model::random_detail::random_tensor;

int64_t build_random_mmproj(const RandomMmprojSpec& s, gguf::Writer& w) {
    if (s.projector == "qwen3vl_merger") return build_random_qwen3vl_mmproj(s, w);
    if (s.projector != "gemma3")
        fail("gen-model: the mmproj projector '{}' is not supported (gemma3, qwen3vl_merger)", s.projector);
    if (s.image_size < 1 || s.patch_size < 1 || s.pool < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_layers < 1 ||
        s.n_heads < 1 || s.text_dim < 1)
        fail("gen-model: every mmproj size must be positive");
    if (s.image_size % s.patch_size || (s.image_size / s.patch_size) % s.pool)
        fail("gen-model: the mmproj image size {} must be a multiple of patch {} x pool {}", s.image_size, s.patch_size,
             s.pool);
    if (s.n_embd % s.n_heads) fail("gen-model: the mmproj width {} is not a multiple of {} heads", s.n_embd, s.n_heads);
    const int64_t d = s.n_embd, p = s.patch_size, n_patches = (s.image_size / p) * (s.image_size / p);
    w.set("general.architecture", Value::string("clip"));
    w.set("general.name", Value::string("random-mmproj"));
    w.set("general.file_type", Value::u32(s.type == GgmlType::F32 ? 0 : s.type == GgmlType::F16 ? 1 : 32));
    w.set("clip.has_vision_encoder", Value::boolean(true));
    w.set("clip.has_text_encoder", Value::boolean(false));
    w.set("clip.projector_type", Value::string(s.projector));
    w.set("clip.use_gelu", Value::boolean(true));
    w.set("clip.vision.image_size", Value::u32(uint32_t(s.image_size)));
    w.set("clip.vision.patch_size", Value::u32(uint32_t(p)));
    w.set("clip.vision.embedding_length", Value::u32(uint32_t(d)));
    w.set("clip.vision.feed_forward_length", Value::u32(uint32_t(s.n_ff)));
    w.set("clip.vision.block_count", Value::u32(uint32_t(s.n_layers)));
    w.set("clip.vision.projection_dim", Value::u32(uint32_t(s.text_dim)));
    w.set("clip.vision.attention.head_count", Value::u32(uint32_t(s.n_heads)));
    w.set("clip.vision.attention.layer_norm_epsilon", Value::f32(1e-6f));
    w.set("clip.vision.projector.scale_factor", Value::u32(uint32_t(s.pool)));
    w.set("clip.vision.image_mean", Value::f32s({0.5f, 0.5f, 0.5f}));
    w.set("clip.vision.image_std", Value::f32s({0.5f, 0.5f, 0.5f}));

    Rng rng(s.seed);
    int64_t params = 0;
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float stddev, GgmlType type) {
        int64_t n = 1;
        for (int64_t v : shape) n *= v;
        w.add_tensor(name, type, std::move(shape), random_tensor(rng, n, stddev, type));
        params += n;
    };
    auto around_one = [&](const std::string& name, int64_t n) {
        std::vector<uint8_t> bytes = random_tensor(rng, n, 0.2f, GgmlType::F32);
        for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(bytes.data())[i] += 1.0f;
        w.add_tensor(name, GgmlType::F32, {n}, std::move(bytes));
        params += n;
    };
    auto layer_norm = [&](const std::string& name) {
        around_one(name + ".weight", d);
        tensor(name + ".bias", {d}, 0.1f, GgmlType::F32);
    };
    const float in_scale = 1.0f / std::sqrt(float(d));
    // Pixels are in [-1, 1]: fan-in 3 p^2.
    tensor("v.patch_embd.weight", {p, p, 3, d}, 1.0f / std::sqrt(float(3 * p * p)), s.type);
    tensor("v.patch_embd.bias", {d}, 0.1f, GgmlType::F32);
    tensor("v.position_embd.weight", {d, n_patches}, 0.5f, s.type);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        layer_norm(b + "ln1");
        for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
            tensor(b + m + ".weight", {d, d}, in_scale, s.type);
            tensor(b + m + ".bias", {d}, 0.1f, GgmlType::F32);
        }
        layer_norm(b + "ln2");
        tensor(b + "ffn_up.weight", {d, s.n_ff}, in_scale, s.type);
        tensor(b + "ffn_up.bias", {s.n_ff}, 0.1f, GgmlType::F32);
        tensor(b + "ffn_down.weight", {s.n_ff, d}, 1.0f / std::sqrt(float(s.n_ff)), s.type);
        tensor(b + "ffn_down.bias", {d}, 0.1f, GgmlType::F32);
    }
    layer_norm("v.post_ln");
    around_one("mm.soft_emb_norm.weight", d);
    tensor("mm.input_projection.weight", {s.text_dim, d}, in_scale, s.type);
    return params;
}

int64_t write_random_mmproj(const RandomMmprojSpec& spec, const std::string& path) {
    gguf::Writer w;
    const int64_t params = build_random_mmproj(spec, w);
    w.write(path);
    return params;
}

}  // namespace pagoda::vision
