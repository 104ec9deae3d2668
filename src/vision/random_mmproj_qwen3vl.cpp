// gen-model's qwen3vl_merger mmproj writer (see random_mmproj.h; tensors as qwen3vl_tower.h lists).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_tensors.h"
#include "vision/random_mmproj.h"

namespace pagoda::vision {

using gguf::GgmlType;
using gguf::Value;
using model::random_detail::Rng;
using model::random_detail::random_tensor;

int64_t build_random_qwen3vl_mmproj(const RandomMmprojSpec& s, gguf::Writer& w) {
    if (s.patch_size < 1 || s.merge < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_layers < 1 || s.n_heads < 1 ||
        s.text_dim < 1 || s.pos_grid < 1 || s.min_pixels < 1 || s.max_pixels < s.min_pixels)
        fail("gen-model: every qwen3vl_merger mmproj size must be positive (and min pixels at most max pixels)");
    if (s.n_embd % s.n_heads || (s.n_embd / s.n_heads) % 4)
        fail("gen-model: the mmproj width {} must be {} heads of a multiple of 4", s.n_embd, s.n_heads);
    if (s.n_deepstack < 0 || s.n_deepstack > s.n_layers)
        fail("gen-model: {} deep-stack mergers for {} vision layers", s.n_deepstack, s.n_layers);
    const int64_t d = s.n_embd, p = s.patch_size, m = s.merge * s.merge * d;
    w.set("general.architecture", Value::string("clip"));
    w.set("general.name", Value::string("random-mmproj"));
    w.set("general.file_type", Value::u32(s.type == GgmlType::F32 ? 0 : s.type == GgmlType::F16 ? 1 : 32));
    w.set("clip.has_vision_encoder", Value::boolean(true));
    w.set("clip.has_text_encoder", Value::boolean(false));
    w.set("clip.projector_type", Value::string("qwen3vl_merger"));
    w.set("clip.use_gelu", Value::boolean(true));
    w.set("clip.vision.image_size", Value::u32(uint32_t(s.pos_grid * p)));
    w.set("clip.vision.patch_size", Value::u32(uint32_t(p)));
    w.set("clip.vision.embedding_length", Value::u32(uint32_t(d)));
    w.set("clip.vision.feed_forward_length", Value::u32(uint32_t(s.n_ff)));
    w.set("clip.vision.block_count", Value::u32(uint32_t(s.n_layers)));
    w.set("clip.vision.projection_dim", Value::u32(uint32_t(s.text_dim)));
    w.set("clip.vision.attention.head_count", Value::u32(uint32_t(s.n_heads)));
    w.set("clip.vision.attention.layer_norm_epsilon", Value::f32(1e-6f));
    w.set("clip.vision.spatial_merge_size", Value::u32(uint32_t(s.merge)));
    w.set("clip.vision.image_min_pixels", Value::u32(uint32_t(s.min_pixels)));
    w.set("clip.vision.image_max_pixels", Value::u32(uint32_t(s.max_pixels)));
    w.set("clip.vision.image_mean", Value::f32s({0.5f, 0.5f, 0.5f}));
    w.set("clip.vision.image_std", Value::f32s({0.5f, 0.5f, 0.5f}));
    std::vector<Value> deepstack;
    for (int64_t l = 0; l < s.n_layers; ++l) deepstack.push_back(Value::boolean(l < s.n_deepstack));
    w.set("clip.vision.is_deepstack_layers", Value::array(gguf::ValueType::boolean, std::move(deepstack)));

    Rng rng(s.seed);
    int64_t params = 0;
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float stddev, GgmlType type) {
        int64_t n = 1;
        for (int64_t v : shape) n *= v;
        w.add_tensor(name, type, std::move(shape), random_tensor(rng, n, stddev, type));
        params += n;
    };
    auto layer_norm = [&](const std::string& name, int64_t n) {
        std::vector<uint8_t> bytes = random_tensor(rng, n, 0.2f, GgmlType::F32);
        for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(bytes.data())[i] += 1.0f;
        w.add_tensor(name + ".weight", GgmlType::F32, {n}, std::move(bytes));
        tensor(name + ".bias", {n}, 0.1f, GgmlType::F32);
        params += n;
    };
    const float in_scale = 1.0f / std::sqrt(float(d));
    // Two temporal kernels over the same picture: each half the fan-in scale.
    for (const char* name : {"v.patch_embd.weight", "v.patch_embd.weight.1"})
        tensor(name, {p, p, 3, d}, 0.5f / std::sqrt(float(3 * p * p)), s.type);
    tensor("v.patch_embd.bias", {d}, 0.1f, GgmlType::F32);
    tensor("v.position_embd.weight", {d, s.pos_grid * s.pos_grid}, 0.5f, s.type);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        layer_norm(b + "ln1", d);
        tensor(b + "attn_qkv.weight", {d, 3 * d}, in_scale, s.type);
        tensor(b + "attn_qkv.bias", {3 * d}, 0.1f, GgmlType::F32);
        tensor(b + "attn_out.weight", {d, d}, in_scale, s.type);
        tensor(b + "attn_out.bias", {d}, 0.1f, GgmlType::F32);
        layer_norm(b + "ln2", d);
        tensor(b + "ffn_up.weight", {d, s.n_ff}, in_scale, s.type);
        tensor(b + "ffn_up.bias", {s.n_ff}, 0.1f, GgmlType::F32);
        tensor(b + "ffn_down.weight", {s.n_ff, d}, 1.0f / std::sqrt(float(s.n_ff)), s.type);
        tensor(b + "ffn_down.bias", {d}, 0.1f, GgmlType::F32);
    }
    auto merger = [&](const std::string& norm, const std::string& fc1, const std::string& fc2, int64_t norm_width) {
        layer_norm(norm, norm_width);
        tensor(fc1 + ".weight", {m, m}, 1.0f / std::sqrt(float(m)), s.type);
        tensor(fc1 + ".bias", {m}, 0.1f, GgmlType::F32);
        tensor(fc2 + ".weight", {m, s.text_dim}, 1.0f / std::sqrt(float(m)), s.type);
        tensor(fc2 + ".bias", {s.text_dim}, 0.1f, GgmlType::F32);
    };
    merger("v.post_ln", "mm.0", "mm.2", d);
    for (int64_t l = 0; l < s.n_deepstack; ++l) {
        const std::string b = fmt::format("v.deepstack.{}.", l);
        merger(b + "norm", b + "fc1", b + "fc2", m);
    }
    return params;
}

}  // namespace pagoda::vision
