// mmproj metadata and tensor validation (see mmproj.h).
#include "vision/mmproj.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::vision {

namespace {

int64_t positive(const gguf::File& f, const std::string& key, int64_t limit) {
    const int64_t v = f.get_int(key);
    if (v < 1 || v > limit) fail("{}: {} is {}, expected 1..{}", f.name(), key, v, limit);
    return v;
}

bool has_shape(const gguf::File& f, const std::string& name, std::vector<int64_t> shape) {
    const auto* t = f.find_tensor(name);
    return t && t->shape == shape;
}

void read_image_normalization(const gguf::File& f, VisionConfig& c) {
    for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
        if (!f.has(key)) continue;  // SigLIP's and Qwen's 0.5 / 0.5
        const std::vector<float> v = f.get_floats(key);
        if (v.size() != 3) fail("{}: {} has {} values, expected 3", f.name(), key, v.size());
        for (int i = 0; i < 3; ++i) {
            if (std::string_view(key).ends_with("std") && !(v[size_t(i)] > 0))
                fail("{}: {}[{}] is {}, expected positive", f.name(), key, i, v[size_t(i)]);
            (std::string_view(key).ends_with("std") ? c.norm.std : c.norm.mean)[size_t(i)] = v[size_t(i)];
        }
    }
}

}  // namespace

void expect_mmproj_tensor(const gguf::File& f, const std::string& name, std::vector<int64_t> shape) {
    const auto* t = f.find_tensor(name);
    if (!t) fail("{}: tensor {} is missing", f.name(), name);
    if (t->shape != shape) {
        auto show = [](const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); };
        fail("{}: tensor {} has shape {}, expected {}", f.name(), name, show(t->shape), show(shape));
    }
}

VisionConfig read_vision_config(const gguf::File& f) {
    const std::string arch = f.get_string_or("general.architecture", "");
    if (arch != "clip")
        fail("{}: not a vision projector (mmproj) file: general.architecture is '{}', expected 'clip'", f.name(), arch);
    if (!f.get_bool_or("clip.has_vision_encoder", false))
        fail("{}: the mmproj file has no vision encoder (clip.has_vision_encoder is not true)", f.name());
    VisionConfig c;
    c.projector = f.get_string_or("clip.vision.projector_type", f.get_string_or("clip.projector_type", ""));
    if (c.projector.empty()) fail("{}: clip.projector_type is missing", f.name());
    if (c.projector != "gemma3" && c.projector != "qwen3vl_merger" && c.projector != "gemma4v")
        fail("{}: the '{}' vision projector is not supported yet (supported: gemma3, qwen3vl_merger, gemma4v)", f.name(),
             c.projector);
    c.image_size = positive(f, "clip.vision.image_size", 8192);
    c.patch_size = positive(f, "clip.vision.patch_size", 1024);
    c.n_embd = positive(f, "clip.vision.embedding_length", 1 << 16);
    c.n_ff = positive(f, "clip.vision.feed_forward_length", 1 << 18);
    c.n_layers = positive(f, "clip.vision.block_count", 1024);
    c.n_heads = positive(f, "clip.vision.attention.head_count", 1024);
    c.text_dim = positive(f, "clip.vision.projection_dim", 1 << 18);
    c.eps = float(f.get_float_or("clip.vision.attention.layer_norm_epsilon", 1e-6));
    if (!(c.eps > 0 && c.eps < 1)) fail("{}: clip.vision.attention.layer_norm_epsilon is {}, expected in (0, 1)", f.name(), c.eps);
    if (c.n_embd % c.n_heads) fail("{}: the vision width {} is not a multiple of {} heads", f.name(), c.n_embd, c.n_heads);
    read_image_normalization(f, c);
    if (c.qwen3vl()) {
        read_qwen3vl_config(f, c);
        return c;
    }
    if (c.gemma4v()) {
        read_gemma4v_config(f, c);
        return c;
    }
    // Gemma 3's pooling: llama.cpp reads the kernel from the scale factor, 4 when absent.
    c.pool = f.has("clip.vision.projector.scale_factor") ? positive(f, "clip.vision.projector.scale_factor", 1024) : 4;
    if (c.image_size % c.patch_size)
        fail("{}: image size {} is not a multiple of the patch size {}", f.name(), c.image_size, c.patch_size);
    if (c.patches_per_side() % c.pool)
        fail("{}: {} patches per side do not pool by {} (clip.vision.projector.scale_factor)", f.name(),
             c.patches_per_side(), c.pool);

    const int64_t d = c.n_embd, p = c.patch_size;
    expect_mmproj_tensor(f, "v.patch_embd.weight", {p, p, 3, d});
    if (f.find_tensor("v.patch_embd.bias")) expect_mmproj_tensor(f, "v.patch_embd.bias", {d});
    expect_mmproj_tensor(f, "v.position_embd.weight", {d, c.n_patches()});
    // Legacy naming: fc1 written as ffn_down (shape [n_embd, n_ff]) and fc2 as ffn_up.
    if (has_shape(f, "v.blk.0.ffn_down.weight", {d, c.n_ff}) && has_shape(f, "v.blk.0.ffn_up.weight", {c.n_ff, d}) &&
        c.n_ff != d) {
        c.ffn_up = "ffn_down";
        c.ffn_down = "ffn_up";
    }
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
            expect_mmproj_tensor(f, b + m + ".weight", {d, d});
            expect_mmproj_tensor(f, b + m + ".bias", {d});
        }
        for (const char* n : {"ln1", "ln2"}) {
            expect_mmproj_tensor(f, b + n + ".weight", {d});
            expect_mmproj_tensor(f, b + n + ".bias", {d});
        }
        expect_mmproj_tensor(f, b + c.ffn_up + ".weight", {d, c.n_ff});
        expect_mmproj_tensor(f, b + c.ffn_up + ".bias", {c.n_ff});
        expect_mmproj_tensor(f, b + c.ffn_down + ".weight", {c.n_ff, d});
        expect_mmproj_tensor(f, b + c.ffn_down + ".bias", {d});
    }
    expect_mmproj_tensor(f, "v.post_ln.weight", {d});
    expect_mmproj_tensor(f, "v.post_ln.bias", {d});
    expect_mmproj_tensor(f, "mm.soft_emb_norm.weight", {d});
    expect_mmproj_tensor(f, "mm.input_projection.weight", {c.text_dim, d});
    // Norm weights, biases and the position table are read as floats; the matrices go to the backend.
    for (const auto& t : f.tensors())
        if (t.shape.size() == 1 && t.type != gguf::GgmlType::F32 && t.type != gguf::GgmlType::F16)
            fail("{}: tensor {} is {}, expected F32 or F16", f.name(), t.name, gguf::type_traits(t.type).name);
    return c;
}

std::string describe(const VisionConfig& c) {
    if (c.gemma4v())
        return fmt::format("{} vision tower: images of up to {} tokens, {}x{} patches pooled {}x{}, {} layers, width {}, "
                           "{} heads, image tokens of width {}",
                           c.projector, c.max_soft_tokens, c.patch_size, c.patch_size, c.pool, c.pool, c.n_layers,
                           c.n_embd, c.n_heads, c.text_dim);
    if (c.qwen3vl())
        return fmt::format("{} vision tower: images of {}..{} pixels, {}x{} patches merged {}x{}, {} layers ({} deep-stack), "
                           "width {}, {} heads, image tokens of width {}",
                           c.projector, c.min_pixels, c.max_pixels, c.patch_size, c.patch_size, c.merge, c.merge,
                           c.n_layers, c.deepstack_layers.size(), c.n_embd, c.n_heads, c.token_width());
    return fmt::format("{} vision tower: {}x{} images, {}x{} patches, {} layers, width {}, {} heads, {} image tokens "
                       "of width {}",
                       c.projector, c.image_size, c.image_size, c.patch_size, c.patch_size, c.n_layers, c.n_embd,
                       c.n_heads, c.n_image_tokens(), c.text_dim);
}

}  // namespace pagoda::vision
